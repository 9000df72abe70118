/* Whole-file reads and read-only mappings, with errors that name the path. */
#ifndef Q35_CORE_FILE_H
#define Q35_CORE_FILE_H
#include <stddef.h>
#include "q35.h"

/* Read a whole file into a malloc'd NUL-terminated buffer (max_bytes bounds it). */
q35_status q35_read_file(const char *path, size_t max_bytes, char **data, size_t *len);

typedef struct q35_mapping {
    const unsigned char *data; /* [size] read-only */
    size_t size;
    int anon;                  /* 1: an anonymous mapping the file was read into (not backed by the page cache) */
} q35_mapping;
q35_status q35_map_file(const char *path, q35_mapping *m);
/* Read the whole file into anonymous memory (weights then live outside the page cache, which
 * the host may evict), same interface as a mapping. */
q35_status q35_load_file(const char *path, q35_mapping *m);
void q35_unmap_file(q35_mapping *m);
/* While set (on this thread), q35_load_file reports each file's bytes read so far: fn(path, done,
 * size, user), at least once per 64 MiB and at the end. NULL stops it. */
void q35_file_set_read_progress(void (*fn)(const char *path, size_t done, size_t size, void *user), void *user);

int q35_file_exists(const char *path);
/* dir + "/" + name into out (cap bytes); fails on truncation. */
q35_status q35_path_join(char *out, size_t cap, const char *dir, const char *name);
#endif
