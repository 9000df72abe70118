/* The C synthetic-weight generator against the Python oracle's: the tensor list derived from a
 * config equals what save_pretrained wrote (names, shapes, dtypes), and the bytes match the
 * checksums tools/oracle recorded. */
#include "formats/json.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/synth.h"
#include "test.h"

static void check_fixture(const char *name) {
    char dir[1024], path[1100];
    snprintf(dir, sizeof dir, "%s/models/%s", test_data_dir(), name);
    q35_config c;
    if (q35_config_load(dir, &c)) { CHECK(0, "%s", q35_last_error()); return; }
    snprintf(path, sizeof path, "%s/synthetic.json", dir);
    cJSON *syn;
    if (q35_json_load_file(path, 1u << 24, &syn)) { CHECK(0, "%s", q35_last_error()); return; }
    q35_synth_tensor *list;
    int n;
    CHECK(q35_synth_list(&c, &list, &n) == Q35_OK, "%s", q35_last_error());
    const cJSON *tensors = cJSON_GetObjectItemCaseSensitive(syn, "tensors"), *seed_j = cJSON_GetObjectItemCaseSensitive(syn, "seed");
    uint64_t seed = cJSON_IsString(seed_j) ? strtoull(seed_j->valuestring, NULL, 0) : (uint64_t)cJSON_GetNumberValue(seed_j);
    int matched = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *t, *found = NULL;
        cJSON_ArrayForEach(t, tensors) if (!strcmp(cJSON_GetObjectItemCaseSensitive(t, "name")->valuestring, list[i].name)) found = t;
        CHECK(found != NULL, "%s: %s derived from config.json is not in the oracle's checkpoint", name, list[i].name);
        if (!found) continue;
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(found, "shape");
        int same = cJSON_GetArraySize(sh) == list[i].ndim;
        for (int d = 0; same && d < list[i].ndim; d++) same = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble == list[i].shape[d];
        CHECK(same, "%s: %s shape differs from the oracle's", name, list[i].name);
        const char *dt = cJSON_GetObjectItemCaseSensitive(found, "dtype")->valuestring;
        CHECK(!strcmp(dt, list[i].dtype == Q35_DT_F32 ? "F32" : "BF16"), "%s: %s dtype %s differs", name, list[i].name, dt);
        if (!same) continue;
        int64_t numel = 1;
        for (int d = 0; d < list[i].ndim; d++) numel *= list[i].shape[d];
        float center, scale;
        q35_synth_rule(list[i].name, list[i].ndim, list[i].shape, &center, &scale);
        size_t bytes = (size_t)numel * q35_dtype_size(list[i].dtype);
        void *buf = malloc(bytes);
        q35_synth_fill(list[i].name, seed, list[i].dtype, center, scale, numel, buf);
        uint64_t h = q35_fnv1a64(buf, bytes, Q35_FNV_OFFSET);
        free(buf);
        uint64_t want = strtoull(cJSON_GetObjectItemCaseSensitive(found, "fnv1a64")->valuestring, NULL, 16);
        CHECK(h == want, "%s: %s checksum %016llx, oracle %016llx", name, list[i].name, (unsigned long long)h, (unsigned long long)want);
        matched += h == want;
    }
    printf("# %s: %d text tensors derived from config.json, %d match the oracle bit for bit\n", name, n, matched);
    free(list);
    cJSON_Delete(syn);
}

static void test_tiny_vl(void) { check_fixture("tiny-vl"); }     /* wrapper layout, tied */
static void test_narrow8(void) { check_fixture("narrow8"); }     /* flat layout, lm_head stored */
static void test_hv_gt_hk(void) { check_fixture("hv-gt-hk"); }   /* more value heads than key heads */

int main(void) {
    RUN(test_tiny_vl);
    RUN(test_narrow8);
    RUN(test_hv_gt_hk);
    TEST_EXIT();
}
