// The I/O floor of compacting one 16 MiB value-log segment in place, per victim:
// read it through read() in 256 KiB chunks, keep `keep` of its 1 KiB records (copied into a
// 1 MiB buffer), write the kept bytes to a new file a MiB at a time with writeback started
// after each, fdatasync it, rename it over the victim (dropping the victim's page cache).
// argv[4] picks how the victim is read: r (read(), the default), m (mmap), p (mmap, MAP_POPULATE).
// Victims are written (and fdatasync'ed) first, untimed, as the log would have.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#define SEG (16 << 20)
#define REC 1040
static double cpu(void) { struct rusage u; getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec * 1e-6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec * 1e-6; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv) {
  const char *dir = argv[1]; int n = atoi(argv[2]); double keep = atof(argv[3]); char mode = argc > 4 ? argv[4][0] : 'r';
  char *seg = malloc(SEG), *chunk = malloc(256 << 10), *out = malloc(1 << 20), path[256], tmp[256];
  for (int i = 0; i < SEG; i++) seg[i] = rand();
  for (int v = 0; v < n; v++) {
    snprintf(path, sizeof path, "%s/%08d.vlog", dir, v);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    for (int off = 0; off < SEG; off += 1 << 20) if (write(fd, seg + off, 1 << 20) != 1 << 20) return 1;
    fdatasync(fd); close(fd);
  }
  double c0 = cpu(), t0 = now(); long kept_records = 0;
  for (int v = 0; v < n; v++) {
    snprintf(path, sizeof path, "%s/%08d.vlog", dir, v);
    snprintf(tmp, sizeof tmp, "%s/%08d.vlog.tmp", dir, v);
    int in = open(path, O_RDONLY), o = open(tmp, O_CREAT | O_TRUNC | O_WRONLY, 0644);
    size_t used = 0, written = 0; unsigned r = v * 7919u;
    char *map = mode == 'r' ? NULL : mmap(NULL, SEG, PROT_READ, MAP_SHARED | (mode == 'p' ? MAP_POPULATE : 0), in, 0);
    for (long base = 0;; base += 256 << 10) {
      ssize_t got;
      const char *src = chunk;
      if (map) { got = base < SEG ? 256 << 10 : 0; src = map + base; } else got = read(in, chunk, 256 << 10);
      if (got <= 0) break;
      for (ssize_t p = 0; p + REC <= got; p += REC) {
        r = r * 1103515245u + 12345u;
        if ((r >> 8) % 1000 < keep * 1000) {
          if (used + REC > (1 << 20)) {
            if (write(o, out, used) != (ssize_t)used) return 1;
            sync_file_range(o, written, used, SYNC_FILE_RANGE_WRITE);
            written += used; used = 0;
          }
          memcpy(out + used, src + p, REC); used += REC; kept_records++;
        }
      }
    }
    if (used) { if (write(o, out, used) != (ssize_t)used) return 1; }
    fdatasync(o); close(o); close(in);
    if (map) munmap(map, SEG);
    rename(tmp, path);
  }
  double c1 = cpu(), t1 = now();
  printf("read %c, victims %d keep %.2f: cpu %.1f ms per victim, wall %.1f ms per victim, %.2f us cpu per kept record\n",
         mode, n, keep, (c1 - c0) * 1e3 / n, (t1 - t0) * 1e3 / n, (c1 - c0) * 1e6 / kept_records);
  return 0;
}
