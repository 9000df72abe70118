/* Checkpoints of tests/data/models/ that are too large to commit (shape08b): each has a
 * synthetic.json naming its seed and every tensor's checksum. prepare_model regenerates such a
 * checkpoint under the test work dir (one copy serves every test binary) and checks each tensor
 * against the checksums the oracle recorded; a directory without synthetic.json is used as it is
 * (single file or shards). Shared by test_parity and test_quant_quality. */
#ifndef Q35_TEST_SYNTH_FIXTURE_H
#define Q35_TEST_SYNTH_FIXTURE_H
#include <sys/stat.h>

#include "core/file.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "model/synth.h"
#include "test.h"

static int copy_file(const char *from, const char *to) {
    char *buf;
    size_t len;
    if (q35_read_file(from, 1u << 26, &buf, &len)) return -1;
    FILE *f = fopen(to, "wb");
    int ok = f && fwrite(buf, 1, len, f) == len;
    if (f) fclose(f);
    free(buf);
    return ok ? 0 : -1;
}

/* Regenerate (when no model.safetensors is committed) or verify a synthetic checkpoint.
 * Returns the directory to load from in out_dir. */
static int prepare_model(const char *src, const char *name, char *out_dir, size_t cap) {
    char path[4096];
    snprintf(path, sizeof path, "%s/synthetic.json", src);
    snprintf(out_dir, cap, "%s", src);
    if (!q35_file_exists(path)) return 0;
    cJSON *syn;
    if (q35_json_load_file(path, 1u << 24, &syn)) {
        fprintf(stderr, "  %s\n", q35_last_error());
        return -1;
    }
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(syn, "format");
    if (!cJSON_IsNumber(format) || format->valuedouble != Q35_SYNTH_FORMAT) {
        fprintf(stderr, "  %s: synthetic.json has format %g, the generator writes %d\n", name, cJSON_GetNumberValue(format), Q35_SYNTH_FORMAT);
        cJSON_Delete(syn);
        return -1;
    }
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(syn, "tensors");
    const cJSON *seed_j = cJSON_GetObjectItemCaseSensitive(syn, "seed");
    int n = cJSON_GetArraySize(tensors);
    q35_synth_tensor *list = calloc((size_t)n, sizeof *list);
    uint64_t *sums = calloc((size_t)n, sizeof *sums);
    uint64_t seed = 0;
    if (cJSON_IsString(seed_j)) seed = strtoull(seed_j->valuestring, NULL, 0);
    else if (cJSON_IsNumber(seed_j)) seed = (uint64_t)seed_j->valuedouble;
    for (int i = 0; i < n; i++) {
        const cJSON *t = cJSON_GetArrayItem(tensors, i);
        snprintf(list[i].name, sizeof list[i].name, "%s", cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring);
        list[i].dtype = strcmp(cJSON_GetObjectItemCaseSensitive(t, "dtype")->valuestring, "F32") == 0 ? Q35_DT_F32 : Q35_DT_BF16;
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(t, "shape");
        list[i].ndim = cJSON_GetArraySize(sh);
        for (int d = 0; d < list[i].ndim; d++) list[i].shape[d] = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble;
        sums[i] = strtoull(cJSON_GetObjectItemCaseSensitive(t, "fnv1a64")->valuestring, NULL, 16);
    }
    cJSON_Delete(syn);
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    int committed = q35_file_exists(path);
    if (!committed) {
        snprintf(out_dir, cap, "%s/models/%s", test_work_dir(), name);
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "%s/models", test_work_dir());
        mkdir(cmd, 0755);
        mkdir(out_dir, 0755);
        char from[4096], to[4200];
        snprintf(from, sizeof from, "%s/config.json", src);
        snprintf(to, sizeof to, "%s/config.json", out_dir);
        copy_file(from, to);
        snprintf(path, sizeof path, "%s/model.safetensors", out_dir);
        if (!q35_file_exists(path) && q35_synth_write(path, seed, list, n)) {
            fprintf(stderr, "  %s\n", q35_last_error());
            free(list); free(sums);
            return -1;
        }
    }
    /* Every tensor's bytes must match the checksum the oracle recorded. */
    q35_st_index st;
    int bad = 0;
    if (q35_st_open_file(path, &st)) {
        fprintf(stderr, "  %s\n", q35_last_error());
        bad = 1;
    } else {
        for (int i = 0; i < n; i++) {
            const q35_tensor *t = q35_st_find(&st, list[i].name);
            uint64_t h = t ? q35_fnv1a64(t->data, t->nbytes, Q35_FNV_OFFSET) : 0;
            if (h != sums[i]) {
                fprintf(stderr, "  %s: tensor %s checksum %016llx, oracle recorded %016llx\n", name, list[i].name, (unsigned long long)h,
                        (unsigned long long)sums[i]);
                bad++;
            }
        }
        q35_st_close(&st);
    }
    free(list);
    free(sums);
    return bad ? -1 : 0;
}

#endif
