#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <time.h>
#include <linux/falloc.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static double cpu(){struct timespec t;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  const char*mode=argv[1]; int dosync=argc>2; size_t seg=16<<20; int nseg=64; size_t chunk=1<<20;
  char*buf=aligned_alloc(4096,chunk); memset(buf,7,chunk);
  char name[64];
  for(int i=0;i<nseg;i++){sprintf(name,"f%d",i);int fd=open(name,O_CREAT|O_WRONLY|O_TRUNC,0644);for(size_t o=0;o<seg;o+=chunk)write(fd,buf,chunk);fsync(fd);close(fd);}
  for(int round=0;round<3;round++){
    double t0=now(),c0=cpu(), tdel=0;
    for(int i=0;i<nseg;i++){
      sprintf(name,"f%d",i);
      int fd;
      if(!strcmp(mode,"new")){double a=cpu();unlink(name);tdel+=cpu()-a;fd=open(name,O_CREAT|O_WRONLY|O_TRUNC,0644);}
      else if(!strcmp(mode,"falloc")){double a=cpu();unlink(name);tdel+=cpu()-a;fd=open(name,O_CREAT|O_WRONLY|O_TRUNC,0644);fallocate(fd,0,0,seg);}
      else if(!strcmp(mode,"drop")){fd=open(name,O_WRONLY);double a=cpu();posix_fadvise(fd,0,0,POSIX_FADV_DONTNEED);tdel+=cpu()-a;}
      else if(!strcmp(mode,"zero")){fd=open(name,O_WRONLY);double a=cpu();fallocate(fd,FALLOC_FL_ZERO_RANGE,0,seg);tdel+=cpu()-a;}
      else if(!strcmp(mode,"trunc")){fd=open(name,O_WRONLY);double a=cpu();ftruncate(fd,0);tdel+=cpu()-a;}
      else fd=open(name,O_WRONLY);
      for(size_t o=0;o<seg;o+=chunk){ if(pwrite(fd,buf,chunk,o)!=chunk)return 1; if(dosync)sync_file_range(fd,o,chunk,SYNC_FILE_RANGE_WRITE);}
      if(dosync)fdatasync(fd); close(fd);
    }
    double t1=now(),c1=cpu();
    printf("%-8s sync=%d round %d: %.3f s wall, %.3f s cpu (of which unlink/drop %.3f) -> %.0f MB/s\n",mode,dosync,round,t1-t0,c1-c0,tdel,seg*nseg/1e6/(t1-t0));
  }
  return 0;
}
