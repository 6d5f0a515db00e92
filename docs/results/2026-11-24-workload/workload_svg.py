# Draws workload.svg (this folder) from the figures in this folder's README: python3 workload_svg.py from the repository root.
import math
W,H=900,360
out=[f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
     '<rect width="100%" height="100%" fill="white"/>']
def text(x,y,s,anchor="middle",size=12,weight="normal"):
    out.append(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size}" font-weight="{weight}">{s}</text>')
# Panel 1: priority probe latency, log scale, cpu runs 1 and 2
text(220,22,"bench-priority, CPU place: probe latency (log µs)",size=13,weight="bold")
data=[("run 1 p50",238,72000),("run 1 p99",2900,141000),("run 2 p50",300,51000),("run 2 p99",4000,118000)]
x0,y0,h=60,300,240
lo,hi=1,6  # 10^1..10^6 us
for e in range(lo,hi+1):
    y=y0-(e-lo)/(hi-lo)*h
    out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x0+340}" y2="{y:.1f}" stroke="#ddd"/>')
    text(x0-6,y+4,f"1e{e}",anchor="end",size=10)
for i,(lab,high,normal) in enumerate(data):
    bx=x0+20+i*82
    for j,(v,c) in enumerate([(high,"#2a7"),(normal,"#c44")]):
        yy=y0-(math.log10(v)-lo)/(hi-lo)*h
        out.append(f'<rect x="{bx+j*28}" y="{yy:.1f}" width="24" height="{y0-yy:.1f}" fill="{c}"/>')
    text(bx+26,y0+16,lab,size=10)
out.append(f'<rect x="{x0+20}" y="{y0+26}" width="10" height="10" fill="#2a7"/>'); text(x0+34,y0+35,"Priority::High",anchor="start",size=10)
out.append(f'<rect x="{x0+130}" y="{y0+26}" width="10" height="10" fill="#c44"/>'); text(x0+144,y0+35,"Priority::Normal",anchor="start",size=10)
# Panel 2: bench-step us per step
text(680,22,"bench-step: µs per step (median of 7 rounds)",size=13,weight="bold")
steps=[("cpu",53.4,51.1,44.0),("wgpu:0",218.5,220.6,340.9),("custom_cpu:0",906.9,979.7,4.4)]
x1,y1,h1=490,300,240
mx=1000
for t in range(0,1001,250):
    y=y1-t/mx*h1
    out.append(f'<line x1="{x1}" y1="{y:.1f}" x2="{x1+380}" y2="{y:.1f}" stroke="#ddd"/>')
    text(x1-6,y+4,str(t),anchor="end",size=10)
cols=["#36c","#9bd","#e90"]
for i,(lab,*vals) in enumerate(steps):
    bx=x1+20+i*125
    for j,v in enumerate(vals):
        yy=y1-v/mx*h1
        out.append(f'<rect x="{bx+j*32}" y="{yy:.1f}" width="28" height="{y1-yy:.1f}" fill="{cols[j]}"/>')
        text(bx+j*32+14,yy-3,f"{v:g}",size=9)
    text(bx+46,y1+16,lab,size=10)
for j,lab in enumerate(["eager, elision on","eager, elision off","captured, replayed"]):
    out.append(f'<rect x="{x1+20+j*125}" y="{y1+26}" width="10" height="10" fill="{cols[j]}"/>'); text(x1+34+j*125,y1+35,lab,anchor="start",size=10)
text(W/2,H-6,"2-core VM, 2026-11-24, docs/results/2026-11-24-workload (CUDA halves not yet run)",size=10)
out.append('</svg>')
open("docs/results/2026-11-24-workload/workload.svg","w").write("\n".join(out))
