#include "formats/safetensors.h"

#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "formats/json.h"

#define ST_MAX_HEADER (100u << 20) /* a header over 100 MiB is refused */

typedef struct {
    q35_tensor t;
    size_t begin, end; /* byte offsets in the data section */
    int file;
} st_entry;

static int cmp_entry_name(const void *a, const void *b) {
    return strcmp(((const st_entry *)a)->t.name, ((const st_entry *)b)->t.name);
}
static int cmp_entry_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end < y->end ? -1 : x->end > y->end);
}

/* Growable list of entries, names copied into a list of malloc'd strings freed after packing. */
typedef struct {
    st_entry *v;
    int n, cap;
} entry_list;

static q35_status push_entry(entry_list *l, const st_entry *e) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        st_entry *v = realloc(l->v, (size_t)cap * sizeof *v);
        if (!v) return q35_fail(Q35_ERR_NOMEM, "out of memory reading safetensors index");
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = *e;
    return Q35_OK;
}

/* Parse one mapped file's header, appending its entries. */
static q35_status parse_file(const char *path, const q35_mapping *m, int file_no, entry_list *out) {
    if (m->size < 8) return q35_fail(Q35_ERR_FORMAT, "%s: truncated: %zu bytes, need at least 8 for the header length", path, m->size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | m->data[i];
    if (hlen < 2 || hlen > ST_MAX_HEADER)
        return q35_fail(Q35_ERR_FORMAT, "%s: header length %llu out of range (2..%u)", path, (unsigned long long)hlen, ST_MAX_HEADER);
    if (hlen > m->size - 8)
        return q35_fail(Q35_ERR_FORMAT, "%s: truncated: header length %llu but only %zu bytes follow", path,
                        (unsigned long long)hlen, m->size - 8);
    size_t data_start = 8 + (size_t)hlen, data_size = m->size - data_start;
    cJSON *root;
    q35_status st = q35_json_parse((const char *)m->data + 8, (size_t)hlen, path, &root);
    if (st) return q35_fail_prefix(st, "safetensors header");
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return q35_fail(Q35_ERR_FORMAT, "%s: safetensors header must be a JSON object", path);
    }
    int first = out->n;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        const char *name = item->string;
        if (strcmp(name, "__metadata__") == 0) {
            if (!cJSON_IsObject(item)) { st = q35_fail(Q35_ERR_FORMAT, "%s: __metadata__ must be an object", path); goto fail; }
            continue;
        }
        if (!cJSON_IsObject(item)) { st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': entry must be an object", path, name); goto fail; }
        const char *dts = NULL;
        if ((st = q35_json_str_opt(item, "dtype", name, &dts))) goto fail;
        int dt = dts ? q35_dtype_from_safetensors(dts) : -1;
        if (dt < 0) { st = q35_fail(Q35_ERR_DTYPE, "%s: tensor '%s': unknown dtype '%s'", path, name, dts ? dts : "(missing)"); goto fail; }
        const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
        const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > Q35_MAX_DIMS) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': 'shape' must be an array of at most %d integers", path, name, Q35_MAX_DIMS);
            goto fail;
        }
        if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': 'data_offsets' must be [begin, end]", path, name);
            goto fail;
        }
        st_entry e;
        memset(&e, 0, sizeof e);
        e.t.dtype = (q35_dtype)dt;
        e.t.ndim = cJSON_GetArraySize(shape);
        e.file = file_no;
        unsigned __int128 numel = 1;
        for (int d = 0; d < e.t.ndim; d++) {
            const cJSON *s = cJSON_GetArrayItem(shape, d);
            if (!q35_json_is_int_in(s, 0, 9.0e15)) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer", path, name, d);
                goto fail;
            }
            e.t.shape[d] = (int64_t)s->valuedouble;
            numel *= (unsigned __int128)e.t.shape[d];
            if (numel > ((unsigned __int128)1 << 60)) { st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': shape too large", path, name); goto fail; }
        }
        const cJSON *jb = cJSON_GetArrayItem(offs, 0), *jen = cJSON_GetArrayItem(offs, 1);
        const double b = cJSON_IsNumber(jb) ? jb->valuedouble : -1, en = cJSON_IsNumber(jen) ? jen->valuedouble : -1;
        if (!q35_json_is_int_in(jb, 0, (double)data_size) || !q35_json_is_int_in(jen, b, (double)data_size)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': data_offsets [%.0f, %.0f] out of range (data section is %zu bytes)", path,
                          name, b, en, data_size);
            goto fail;
        }
        e.begin = (size_t)b;
        e.end = (size_t)en;
        unsigned __int128 want = numel * q35_dtype_size(e.t.dtype);
        if (want != (unsigned __int128)(e.end - e.begin)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s': %zu data bytes, but shape and dtype %s need %llu", path, name,
                          e.end - e.begin, q35_dtype_name(e.t.dtype), (unsigned long long)want);
            goto fail;
        }
        e.t.nbytes = e.end - e.begin;
        e.t.data = m->data + data_start + e.begin;
        e.t.name = strdup(name);
        if (!e.t.name) { st = q35_fail(Q35_ERR_NOMEM, "out of memory"); goto fail; }
        if ((st = push_entry(out, &e))) { free((char *)e.t.name); goto fail; }
    }
    /* No two tensors of this file may share bytes. */
    int n = out->n - first;
    if (n > 1) {
        st_entry **by_begin = malloc((size_t)n * sizeof *by_begin);
        if (!by_begin) { st = q35_fail(Q35_ERR_NOMEM, "out of memory"); goto fail; }
        for (int i = 0; i < n; i++) by_begin[i] = &out->v[first + i];
        qsort(by_begin, (size_t)n, sizeof *by_begin, cmp_entry_begin);
        for (int i = 1; i < n; i++) {
            if (by_begin[i]->begin < by_begin[i - 1]->end) {
                st = q35_fail(Q35_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap in the data section", path, by_begin[i - 1]->t.name,
                              by_begin[i]->t.name);
                free(by_begin);
                goto fail;
            }
        }
        free(by_begin);
    }
    cJSON_Delete(root);
    return Q35_OK;
fail:
    cJSON_Delete(root);
    return st;
}

static void free_entries(entry_list *l) {
    for (int i = 0; i < l->n; i++) free((char *)l->v[i].t.name);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

/* Sort, check duplicates, copy names into one blob, copy misaligned tensors. */
static q35_status finish(q35_st_index *idx, entry_list *l) {
    qsort(l->v, (size_t)l->n, sizeof *l->v, cmp_entry_name);
    size_t blob = 0;
    for (int i = 0; i < l->n; i++) {
        if (i > 0 && strcmp(l->v[i].t.name, l->v[i - 1].t.name) == 0)
            return q35_fail(Q35_ERR_FORMAT, "%s: tensor '%s' appears twice", idx->paths[l->v[i].file], l->v[i].t.name);
        blob += strlen(l->v[i].t.name) + 1;
    }
    size_t count = l->n > 0 ? (size_t)l->n : 1;
    idx->names = malloc(blob ? blob : 1);
    idx->tensors = calloc(count, sizeof *idx->tensors);
    idx->owned = calloc(count, sizeof *idx->owned);
    if (!idx->names || !idx->tensors || !idx->owned) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    char *p = idx->names;
    for (int i = 0; i < l->n; i++) {
        q35_tensor t = l->v[i].t;
        size_t len = strlen(t.name) + 1;
        memcpy(p, t.name, len);
        t.name = p;
        p += len;
        size_t align = q35_dtype_size(t.dtype);
        if (t.nbytes && ((uintptr_t)t.data % align) != 0) {
            void *copy = aligned_alloc(64, (t.nbytes + 63) & ~(size_t)63);
            if (!copy) return q35_fail(Q35_ERR_NOMEM, "out of memory copying tensor '%s'", t.name);
            memcpy(copy, t.data, t.nbytes);
            idx->owned[idx->n_owned++] = copy;
            t.data = copy;
        }
        idx->tensors[i] = t;
    }
    idx->n_tensors = l->n;
    return Q35_OK;
}

static q35_status add_file(q35_st_index *idx, const char *path) {
    q35_mapping *maps = realloc(idx->maps, (size_t)(idx->n_files + 1) * sizeof *maps);
    if (!maps) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    idx->maps = maps;
    char **paths = realloc(idx->paths, (size_t)(idx->n_files + 1) * sizeof *paths);
    if (!paths) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    idx->paths = paths;
    char *copy = strdup(path);
    if (!copy) return q35_fail(Q35_ERR_NOMEM, "out of memory");
    q35_status st = idx->load ? q35_load_file(path, &idx->maps[idx->n_files]) : q35_map_file(path, &idx->maps[idx->n_files]);
    if (st) {
        free(copy);
        return st;
    }
    idx->paths[idx->n_files++] = copy;
    return Q35_OK;
}

static q35_status open_file(const char *path, int load, q35_st_index *idx) {
    memset(idx, 0, sizeof *idx);
    idx->load = load;
    entry_list l = {0};
    q35_status st = add_file(idx, path);
    if (!st) st = parse_file(path, &idx->maps[0], 0, &l);
    if (!st) st = finish(idx, &l);
    free_entries(&l);
    if (st) q35_st_close(idx);
    return st;
}

q35_status q35_st_open_file(const char *path, q35_st_index *idx) { return open_file(path, 0, idx); }

q35_status q35_st_open_dir(const char *dir, q35_st_index *idx) { return q35_st_open_dir_ex(dir, 0, idx); }

q35_status q35_st_open_dir_ex(const char *dir, int load, q35_st_index *idx) {
    memset(idx, 0, sizeof *idx);
    idx->load = load;
    char path[4096];
    q35_status st = q35_path_join(path, sizeof path, dir, "model.safetensors.index.json");
    if (st) return st;
    if (!q35_file_exists(path)) {
        if ((st = q35_path_join(path, sizeof path, dir, "model.safetensors"))) return st;
        if (!q35_file_exists(path))
            return q35_fail(Q35_ERR_MISSING, "%s: no model.safetensors or model.safetensors.index.json in this directory", dir);
        return open_file(path, load, idx);
    }
    cJSON *root;
    if ((st = q35_json_load_file(path, 64u << 20, &root))) return st;
    entry_list l = {0};
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(wm)) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: 'weight_map' must be an object of tensor name -> file", path);
        goto done;
    }
    const cJSON *item;
    cJSON_ArrayForEach(item, wm) {
        if (!cJSON_IsString(item) || !item->valuestring[0] || strchr(item->valuestring, '/') || strcmp(item->valuestring, "..") == 0) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: weight_map['%s'] must be a file name in the same directory", path, item->string);
            goto done;
        }
        int found = 0;
        for (int f = 0; f < idx->n_files && !found; f++) {
            const char *slash = strrchr(idx->paths[f], '/');
            found = strcmp(slash ? slash + 1 : idx->paths[f], item->valuestring) == 0;
        }
        if (found) continue;
        char shard[4096];
        if ((st = q35_path_join(shard, sizeof shard, dir, item->valuestring))) goto done;
        if ((st = add_file(idx, shard))) goto done;
        if ((st = parse_file(shard, &idx->maps[idx->n_files - 1], idx->n_files - 1, &l))) goto done;
    }
    /* Every name of the weight map must be in the shard it names. */
    cJSON_ArrayForEach(item, wm) {
        int ok = 0;
        for (int i = 0; i < l.n && !ok; i++) {
            if (strcmp(l.v[i].t.name, item->string) != 0) continue;
            const char *fp = idx->paths[l.v[i].file], *slash = strrchr(fp, '/');
            ok = strcmp(slash ? slash + 1 : fp, item->valuestring) == 0;
        }
        if (!ok) {
            st = q35_fail(Q35_ERR_MISSING, "%s: tensor '%s' is mapped to %s but that file does not hold it", path, item->string,
                          item->valuestring);
            goto done;
        }
    }
    st = finish(idx, &l);
done:
    free_entries(&l);
    cJSON_Delete(root);
    if (st) q35_st_close(idx);
    return st;
}

const q35_tensor *q35_st_find(const q35_st_index *idx, const char *name) {
    int lo = 0, hi = idx->n_tensors - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(idx->tensors[mid].name, name);
        if (c == 0) return &idx->tensors[mid];
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

const char *q35_st_path_of(const q35_st_index *idx, const q35_tensor *t) {
    const unsigned char *p = t->data;
    for (int i = 0; i < idx->n_files; i++)
        if (p >= idx->maps[i].data && p < idx->maps[i].data + idx->maps[i].size) return idx->paths[i];
    return idx->n_files == 1 ? idx->paths[0] : "(safetensors)";
}

void q35_st_close(q35_st_index *idx) {
    for (int i = 0; i < idx->n_files; i++) {
        q35_unmap_file(&idx->maps[i]);
        free(idx->paths[i]);
    }
    for (int i = 0; i < idx->n_owned; i++) free(idx->owned[i]);
    free(idx->maps);
    free(idx->paths);
    free(idx->tensors);
    free(idx->names);
    free(idx->owned);
    memset(idx, 0, sizeof *idx);
}
