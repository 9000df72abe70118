/* safetensors reader: single file or sharded (model.safetensors.index.json), mmap'd, every header
 * field and offset checked. Tensors are looked up by name; their data points into the mapping. */
#ifndef Q35_FORMATS_SAFETENSORS_H
#define Q35_FORMATS_SAFETENSORS_H
#include "core/file.h"
#include "model/tensor.h"
#include "q35.h"

typedef struct q35_st_index {
    q35_mapping *maps;       /* [n_files] one mapping per shard */
    char **paths;            /* [n_files] */
    int n_files;
    q35_tensor *tensors;     /* [n_tensors] sorted by name */
    int n_tensors;
    char *names;             /* storage for every tensor name */
    void **owned;            /* [n_owned] aligned copies of tensors whose data was misaligned in the file */
    int n_owned;
    int load;                /* 1: files are read into memory instead of mapped (set before opening) */
} q35_st_index;

/* Open dir/model.safetensors.index.json if present, else dir/model.safetensors. */
q35_status q35_st_open_dir(const char *dir, q35_st_index *idx);
/* Same, reading the files into memory when load != 0. */
q35_status q35_st_open_dir_ex(const char *dir, int load, q35_st_index *idx);
/* Open one .safetensors file. */
q35_status q35_st_open_file(const char *path, q35_st_index *idx);
/* The path of the file holding t (for messages). */
const char *q35_st_path_of(const q35_st_index *idx, const q35_tensor *t);
const q35_tensor *q35_st_find(const q35_st_index *idx, const char *name);
void q35_st_close(q35_st_index *idx);
#endif
