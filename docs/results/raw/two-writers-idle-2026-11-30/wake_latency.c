#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sched.h>
#include <linux/futex.h>
#include <sys/syscall.h>
static atomic_int flag; static atomic_long sent;
static long now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1000000000L+t.tv_nsec;}
static long lat[2000];
void* waiter(void*a){ cpu_set_t s; CPU_ZERO(&s); CPU_SET(1,&s); pthread_setaffinity_np(pthread_self(),sizeof s,&s);
  for(int i=0;i<2000;i++){ while(atomic_load(&flag)==0) syscall(SYS_futex,&flag,FUTEX_WAIT_PRIVATE,0,0,0,0); lat[i]=now()-atomic_load(&sent); atomic_store(&flag,0);} return 0;}
int main(int argc,char**argv){ int gap_us=atoi(argv[1]); cpu_set_t s; CPU_ZERO(&s); CPU_SET(0,&s); pthread_setaffinity_np(pthread_self(),sizeof s,&s);
  pthread_t t; pthread_create(&t,0,waiter,0);
  for(int i=0;i<2000;i++){ long st=now(); while(now()-st<gap_us*1000L); while(atomic_load(&flag)!=0); atomic_store(&sent,now()); atomic_store(&flag,1); syscall(SYS_futex,&flag,FUTEX_WAKE_PRIVATE,1,0,0,0);}
  pthread_join(t,0); long a[2000]; for(int i=0;i<2000;i++)a[i]=lat[i];
  for(int i=0;i<2000;i++)for(int j=i+1;j<2000;j++)if(a[j]<a[i]){long x=a[i];a[i]=a[j];a[j]=x;}
  printf("gap %d us: wake latency p50 %.1f us p90 %.1f p99 %.1f\n",gap_us,a[1000]/1e3,a[1800]/1e3,a[1980]/1e3); return 0;}
