/* q35_huge_alloc: 2 MiB aligned, zeroed, writable over its whole length, distinct blocks, and the
 * converted weights of a model carved from few chunks (quantize.c's arena). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/hugemem.h"
#include "model/model.h"
#include "q35.h"
#include "test.h"

static void test_alloc(void) {
    const size_t sizes[] = {0, 1, 4096, (2 << 20) - 1, 2 << 20, (3 << 20) + 17};
    uint8_t *p[6];
    for (int i = 0; i < 6; i++) {
        p[i] = q35_huge_alloc(sizes[i]);
        CHECK(p[i] != NULL, "size %zu", sizes[i]);
        if (!p[i]) return;
        CHECK(((uintptr_t)p[i] & ((2u << 20) - 1)) == 0, "size %zu: %p not 2 MiB aligned", sizes[i], (void *)p[i]);
        size_t nz = 0;
        for (size_t k = 0; k < sizes[i]; k++) nz += p[i][k] != 0;
        CHECK(nz == 0, "size %zu: %zu bytes not zero", sizes[i], nz);
        memset(p[i], 0xa0 + i, sizes[i]);
    }
    for (int i = 0; i < 6; i++) { /* no block overwrote another */
        size_t bad = 0;
        for (size_t k = 0; k < sizes[i]; k++) bad += p[i][k] != (uint8_t)(0xa0 + i);
        CHECK(bad == 0, "size %zu: %zu bytes changed", sizes[i], bad);
        q35_huge_free(p[i]);
    }
    q35_huge_free(NULL);
}

/* The talker converted to q4 at load: every converted matrix in one 64 MiB chunk, and the
 * tensors do not overlap. */
static void test_arena(void) {
    char dir[512];
    snprintf(dir, sizeof dir, "%s/models/talker", test_data_dir());
    q35_load_opts o = {.weights = "q4"};
    q35_model *m = NULL;
    CHECK(q35_model_load_ex(dir, &o, &m) == Q35_OK, "%s", q35_last_error());
    if (!m) return;
    CHECK(m->n_owned == 1, "%d chunks", m->n_owned);
    const q35_layer_weights *L = &m->layers[0];
    const q35_tensor *ts[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            if (i == j) continue;
            const uint8_t *a = ts[i]->data, *b = ts[j]->data;
            CHECK(a + ts[i]->nbytes <= b || b + ts[j]->nbytes <= a, "tensors %d and %d overlap", i, j);
        }
    q35_model_free(m);
}

int main(void) {
    RUN(test_alloc);
    RUN(test_arena);
    TEST_EXIT();
}
