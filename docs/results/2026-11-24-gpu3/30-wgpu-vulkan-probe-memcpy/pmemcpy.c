// N threads each memcpy 64 MiB concurrently (own src/dst), median of 7; also N threads each
// copying in 64 KiB chunks (like the in-process all-reduce's pushes).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static size_t BYTES = 64u << 20; static int N; static size_t CH;
static pthread_barrier_t bar;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void *worker(void *arg){ char *s=malloc(BYTES),*d=malloc(BYTES); memset(s,1,BYTES); memset(d,0,BYTES);
  for(int it=0;it<8;it++){ pthread_barrier_wait(&bar); if(CH) for(size_t o=0;o<BYTES;o+=CH) memcpy(d+o,s+o,CH); if(CH) __asm__ volatile("" :: "r"(d) : "memory"); else memcpy(d,s,BYTES); __asm__ volatile("" :: "r"(d) : "memory"); pthread_barrier_wait(&bar);} return 0;}
int main(int argc,char**argv){ N=atoi(argv[1]); CH=argc>2?atoi(argv[2]):0; pthread_barrier_init(&bar,0,N+1); pthread_t t[64]; for(int i=0;i<N;i++) pthread_create(&t[i],0,worker,0);
  double ts[8]; for(int it=0;it<8;it++){ pthread_barrier_wait(&bar); double a=now(); pthread_barrier_wait(&bar); ts[it]=now()-a; }
  for(int i=0;i<N;i++) pthread_join(t[i],0);
  // median of the last 7
  for(int i=1;i<8;i++) for(int j=i+1;j<8;j++) if(ts[j]<ts[i]){double x=ts[i];ts[i]=ts[j];ts[j]=x;}
  printf("threads %d chunk %zu: %.2f ms for each thread's 64 MiB copy (all concurrently)\n", N, CH, ts[4]*1e3); }
