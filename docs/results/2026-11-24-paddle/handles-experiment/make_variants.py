"""Writes the two experiment variants of the ref_cpu test plug-in next to this file:

- ref_nn.cc: registered as `ref_nn`, its create_stream / create_event write non-null handles
  (addresses in a static block) instead of leaving them unwritten;
- ref_count.cc: ref_nn.cc plus a counter per table function, printed to stderr at exit.

    python3 make_variants.py crates/devstream-plugin/test-plugins/ref-cpu/ref_cpu.cc
    g++ -std=c++17 -shared -fPIC -O1 -I PADDLE/include ref_nn.cc -o libref_nn.so
"""
import pathlib
import re
import sys

here = pathlib.Path(__file__).parent
s = pathlib.Path(sys.argv[1]).read_text()
s = s.replace('static char device_type[] = "ref_cpu";', 'static char device_type[] = "ref_nn";')
s = s.replace(
    """static C_Status ref_create_stream(const C_Device device, C_Stream *stream) {
  /* As the reference runtime: succeeds without writing the stream. */
  return C_SUCCESS;""",
    """static char handle_block[64];
static C_Status ref_create_stream(const C_Device device, C_Stream *stream) {
  *stream = (C_Stream)&handle_block[0];
  return C_SUCCESS;""",
)
s = s.replace(
    """static C_Status ref_create_event(const C_Device device, C_Event *event) {
  /* As the reference runtime: succeeds without writing the event. */
  return C_SUCCESS;""",
    """static C_Status ref_create_event(const C_Device device, C_Event *event) {
  *event = (C_Event)&handle_block[8];
  return C_SUCCESS;""",
)
assert "handle_block[8]" in s and '"ref_nn"' in s, "ref_cpu.cc changed: update the patterns"
(here / "ref_nn.cc").write_text(s)

names = re.findall(r"static C_Status (ref_\w+)\(", s)
counters = "#include <stdio.h>\n" + "".join(f"static unsigned long cnt_{n};\n" for n in names)
c = s.replace("#include <stdlib.h>", counters + "#include <stdlib.h>", 1)
for n in names:
    c = re.sub(r"(static C_Status " + n + r"\([^)]*\)\s*\{)", r"\1 cnt_" + n + "++;", c, count=1)
c += "__attribute__((destructor)) static void dump_counts(void) {\n"
c += "".join(f'  if (cnt_{n}) fprintf(stderr, "%s %lu\\n", "{n}", cnt_{n});\n' for n in names)
c += "}\n"
(here / "ref_count.cc").write_text(c)
