#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(int argc,char**argv){
  const char*mode=argv[1]; long total=atol(argv[2])<<20; size_t chunk=1<<20;
  int flags=O_WRONLY|O_CREAT|O_TRUNC; if(!strcmp(mode,"direct")) flags|=O_DIRECT;
  int fd=open(argv[3],flags,0644); if(fd<0){perror("open");return 1;}
  void*buf; posix_memalign(&buf,4096,chunk); memset(buf,0xab,chunk);
  for(size_t i=0;i<chunk;i+=8) ((long*)buf)[i/8]=random();
  double t0=now(); long off=0;
  while(off<total){
    if(pwrite(fd,buf,chunk,off)!=(ssize_t)chunk){perror("write");return 1;}
    off+=chunk;
    if(!strcmp(mode,"sfr")) sync_file_range(fd,off-chunk,chunk,SYNC_FILE_RANGE_WRITE);
    if(!strcmp(mode,"sfr8") && off%(8<<20)==0) sync_file_range(fd,off-(8<<20),8<<20,SYNC_FILE_RANGE_WRITE);
    if(!strcmp(mode,"fds8") && off%(8<<20)==0) fdatasync(fd);
    if(!strcmp(mode,"sfrwait") ) { sync_file_range(fd,off-chunk,chunk,SYNC_FILE_RANGE_WRITE); if (off >= (4<<20)) sync_file_range(fd,off-(4<<20),chunk,SYNC_FILE_RANGE_WAIT_BEFORE|SYNC_FILE_RANGE_WRITE|SYNC_FILE_RANGE_WAIT_AFTER);}
  }
  fdatasync(fd); double t=now()-t0;
  printf("%-8s %6.0f MB/s\n",mode,total/t/1e6); close(fd); unlink(argv[3]); return 0;
}
