#include "core/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/err.h"

q35_status q35_read_file(const char *path, size_t max_bytes, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return q35_fail(errno == ENOENT ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return q35_fail(Q35_ERR_IO, "%s: not a regular file", path);
    }
    if ((unsigned long long)st.st_size > max_bytes) {
        close(fd);
        return q35_fail(Q35_ERR_FORMAT, "%s: file is %lld bytes, more than the %zu this reader accepts", path,
                        (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate %zu bytes", path, n + 1);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            close(fd);
            return q35_fail(Q35_ERR_IO, "%s: read failed after %zu of %zu bytes", path, got, n);
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    *data = buf;
    *len = n;
    return Q35_OK;
}

q35_status q35_map_file(const char *path, q35_mapping *m) {
    m->data = NULL;
    m->size = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return q35_fail(errno == ENOENT ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return q35_fail(Q35_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        return q35_fail(Q35_ERR_FORMAT, "%s: file is empty", path);
    }
    void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return q35_fail(Q35_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    madvise(p, n, MADV_HUGEPAGE); /* file huge pages where the kernel has them (read-only THP for files) */
    m->data = p;
    m->size = n;
    m->anon = 0;
    return Q35_OK;
}

static _Thread_local void (*read_progress)(const char *, size_t, size_t, void *);
static _Thread_local void *read_progress_user;

void q35_file_set_read_progress(void (*fn)(const char *path, size_t done, size_t size, void *user), void *user) {
    read_progress = fn;
    read_progress_user = user;
}

q35_status q35_load_file(const char *path, q35_mapping *m) {
    m->data = NULL;
    m->size = 0;
    m->anon = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return q35_fail(errno == ENOENT ? Q35_ERR_MISSING : Q35_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return q35_fail(Q35_ERR_IO, "%s: not a regular file", path);
    }
    size_t n = (size_t)st.st_size;
    if (n == 0) {
        close(fd);
        return q35_fail(Q35_ERR_FORMAT, "%s: file is empty", path);
    }
    unsigned char *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return q35_fail(Q35_ERR_NOMEM, "%s: cannot allocate %zu bytes to load it", path, n);
    }
    madvise(p, n, MADV_HUGEPAGE);
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got > (64u << 20) ? (64u << 20) : n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            munmap(p, n);
            close(fd);
            return q35_fail(Q35_ERR_IO, "%s: read failed after %zu of %zu bytes", path, got, n);
        }
        got += (size_t)r;
        if (read_progress) read_progress(path, got, n, read_progress_user);
    }
    close(fd);
    mprotect(p, n, PROT_READ);
    m->data = p;
    m->size = n;
    m->anon = 1;
    return Q35_OK;
}

void q35_unmap_file(q35_mapping *m) {
    if (m->data) munmap((void *)m->data, m->size);
    m->data = NULL;
    m->size = 0;
}

int q35_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

q35_status q35_path_join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= cap) return q35_fail(Q35_ERR_ARG, "path too long: %s/%s", dir, name);
    return Q35_OK;
}
