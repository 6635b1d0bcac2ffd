#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static double cpu(){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  const char*mode=argv[1]; size_t seg=16<<20; int nseg=64; size_t chunk=1<<20;
  char*buf=aligned_alloc(4096,chunk); memset(buf,7,chunk);
  char name[64];
  if(!strcmp(mode,"recycle")){ for(int i=0;i<nseg;i++){sprintf(name,"f%d",i);int fd=open(name,O_CREAT|O_WRONLY|O_TRUNC,0644);for(size_t o=0;o<seg;o+=chunk)write(fd,buf,chunk);fsync(fd);close(fd);} }
  for(int round=0;round<3;round++){
    double t0=now(),c0=cpu();
    for(int i=0;i<nseg;i++){
      sprintf(name,"f%d",i);
      int fd;
      if(!strcmp(mode,"new")){unlink(name);fd=open(name,O_CREAT|O_WRONLY|O_TRUNC,0644);}
      else fd=open(name,O_WRONLY);
      for(size_t o=0;o<seg;o+=chunk){ if(pwrite(fd,buf,chunk,o)!=chunk)return 1; sync_file_range(fd,o,chunk,SYNC_FILE_RANGE_WRITE);}
      fdatasync(fd); close(fd);
    }
    double t1=now(),c1=cpu();
    printf("%s round %d: %.0f MB in %.3f s wall, %.3f s cpu -> %.0f MB/s\n",mode,round,(double)seg*nseg/1e6,t1-t0,c1-c0,seg*nseg/1e6/(t1-t0));
  }
  return 0;
}
