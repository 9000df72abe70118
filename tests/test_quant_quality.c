/* What quantized weights cost in output quality (issue 3, "Proof of faithfulness per format").
 *
 * For each checkpoint — the trained talker (peaked distributions) and the random fixtures tiny-vl,
 * narrow8, hv-gt-hk and shape08b (flat logits, many near ties) — a length sweep of 10 prompts is
 * evaluated with the full-precision path (weights as stored, bf16; activations f32) and with the
 * weights converted at load to q8, q4 (Q4R layers) and q4_0 (GGUF Q4_0 layers, the same bytes),
 * and with full-precision weights over an f16 KV cache (--kv-cache f16).
 * Per prompt: the prompt is evaluated at once (all logits), then 32 greedy tokens are generated
 * token by token with the full-precision model; the quantized model is fed the same prompt and the
 * same tokens (teacher forcing), so every position compares the same context:
 *   - top-1 agreement at every position (T prompt positions + 31 generated ones);
 *   - "greedy equal": the quantized model's own greedy continuation equals the full-precision one
 *     (the same as agreement at the 32 positions that choose a generated token);
 *   - KL(P_full || P_quant) of the softmaxes, mean and max over positions;
 *   - the full-precision margin (top-1 minus top-2 logit) at every disagreement: near ties are
 *     reported, not hidden.
 * The assertions (bottom of the file) hold the measured figures as bounds, not wishes: agreement,
 * greedy-equal prompts and KL within the measured values plus a slack; on the talker, q8 departs
 * only at near ties; Q4R below Q4_0 in KL on the talker and in weight error on trained and
 * heavy-tailed rows. (The issue asks q8 to keep every talker continuation: with the head and the
 * embedding as stored it keeps 10 of 10 with the AVX-512 kernels, asserted there; docs/quantization.md
 * has the numbers, and why a Q8_0 head lost two.)
 *
 * `build/tests/test_quant_quality --tables` prints the markdown tables of docs/quantization.md
 * (per fixture and per prompt); `--ablation` adds the tables that tell where the error comes from
 * (which tensors; weights or 8-bit activations), `--verbose` lists every disagreement.
 * Q35_QUALITY_PROMPTS=N measures only the first N prompts of each sweep (the bounds are then not
 * checked). About 30 s here (2 threads), 70 s under ASan. */
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>

#include "core/file.h"
#include "core/hugemem.h"
#include "formats/json.h"
#include "formats/safetensors.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "model/synth.h"
#include "q35.h"
#include "synth_fixture.h"
#include "test.h"

#define N_PROMPTS 10
#define N_GEN 32    /* greedy tokens per prompt */

/* ------------------------------------------------------------------ talker prompts (real text) */
/* Traditional English proverbs (public domain) as the assistant's earlier answers, and the user
 * requests of the talker's training chats (tools/oracle/train_talker.py). */
static const char *const proverbs[] = {
    "A stitch in time saves nine.",
    "Actions speak louder than words.",
    "All that glitters is not gold.",
    "A journey of a thousand miles begins with a single step.",
    "Where there's a will, there's a way.",
    "Don't count your chickens before they hatch.",
    "The early bird catches the worm.",
    "Better late than never.",
    "A penny saved is a penny earned.",
    "Rome wasn't built in a day.",
    "When in Rome, do as the Romans do.",
    "The pen is mightier than the sword.",
    "Don't put all your eggs in one basket.",
    "Every cloud has a silver lining.",
    "Fortune favors the bold.",
    "Honesty is the best policy.",
    "If it ain't broke, don't fix it.",
    "Many hands make light work.",
    "Necessity is the mother of invention.",
    "No news is good news.",
    "People who live in glass houses should not throw stones.",
    "Practice makes perfect.",
    "The grass is always greener on the other side of the fence.",
    "There's no place like home.",
    "Too many cooks spoil the broth.",
    "Two heads are better than one.",
    "You can't judge a book by its cover.",
    "You can lead a horse to water, but you can't make it drink.",
    "A watched pot never boils.",
    "Beggars can't be choosers.",
    "Birds of a feather flock together.",
    "Curiosity killed the cat.",
    "Don't bite the hand that feeds you.",
    "Easy come, easy go.",
    "Good things come to those who wait.",
    "Haste makes waste.",
    "Laughter is the best medicine.",
    "Look before you leap.",
    "Out of sight, out of mind.",
    "Still waters run deep.",
    "The squeaky wheel gets the grease.",
    "Time is money.",
    "What goes around comes around.",
    "An apple a day keeps the doctor away.",
    "Absence makes the heart grow fonder.",
    "A fool and his money are soon parted.",
    "A friend in need is a friend indeed.",
    "All good things must come to an end.",
    "A picture is worth a thousand words.",
    "A rolling stone gathers no moss.",
    "Beauty is in the eye of the beholder.",
    "Better safe than sorry.",
    "Cleanliness is next to godliness.",
    "Don't cry over spilt milk.",
    "Early to bed and early to rise makes a man healthy, wealthy, and wise.\n-- Benjamin Franklin",
    "Knowledge is power.\n-- Francis Bacon",
    "Brevity is the soul of wit.\n-- William Shakespeare, \"Hamlet\"",
    "The only thing we have to fear is fear itself.",
    "Great minds think alike.",
    "He who laughs last laughs best.",
    "If you want something done right, do it yourself.",
    "It takes two to tango.",
    "Kill two birds with one stone.",
    "Let sleeping dogs lie.",
    "Make hay while the sun shines.",
    "Misery loves company.",
    "Never look a gift horse in the mouth.",
    "No man is an island.",
    "Nothing ventured, nothing gained.",
    "Old habits die hard.",
    "One man's trash is another man's treasure.",
    "Patience is a virtue.",
    "Slow and steady wins the race.",
    "Strike while the iron is hot.",
    "The apple doesn't fall far from the tree.",
    "The best things in life are free.",
    "The customer is always right.",
    "The road to hell is paved with good intentions.",
    "There is no such thing as a free lunch.",
    "Variety is the spice of life.",
    "When the going gets tough, the tough get going.",
    "You can't have your cake and eat it too.",
    "You can't teach an old dog new tricks.",
    "A bird in the hand is worth two in the bush.",
    "A chain is only as strong as its weakest link.",
    "All's well that ends well.\n-- William Shakespeare",
    "An ounce of prevention is worth a pound of cure.\n-- Benjamin Franklin",
    "Appearances can be deceptive.",
    "Blood is thicker than water.",
    "Discretion is the better part of valor.",
    "Do unto others as you would have them do unto you.",
    "Every dog has its day.",
    "Familiarity breeds contempt.",
    "Hope for the best, but prepare for the worst.",
    "If at first you don't succeed, try, try again.",
    "It's no use locking the stable door after the horse has bolted.",
    "Little strokes fell great oaks.\n-- Benjamin Franklin",
    "Money doesn't grow on trees.",
    "Necessity knows no law.",
    "One swallow does not make a summer.",
    "Silence is golden.",
    "The proof of the pudding is in the eating.",
    "There are two sides to every question.",
    "Tomorrow is another day.",
    "Waste not, want not.",
    "What can't be cured must be endured.",
    "Where there's smoke, there's fire.",
    "You reap what you sow.",
    "Idle hands are the devil's workshop.",
    "Lightning never strikes twice in the same place.",
    "Half a loaf is better than none.",
    "Don't make a mountain out of a molehill.",
    "The more, the merrier.",
    "Time and tide wait for no man.",
    "First come, first served.",
    "Jack of all trades, master of none.",
    "Let the cat out of the bag.",
    "In for a penny, in for a pound.",
    "Speak softly and carry a big stick.",
    "The bigger they are, the harder they fall.",
};
#define N_PROVERBS ((int)(sizeof proverbs / sizeof proverbs[0]))

static const char *const requests[] = {
    "Tell me a fortune.", "Give me a fortune.", "Say something wise.", "Fortune, please.",
    "What does my fortune say?", "Share some wisdom.", "Tell me something interesting.",
    "Do you have a saying for me?", "Give me a quote.", "Open a fortune cookie for me.",
    "I need some advice.", "Cheer me up.", "Tell me something I don't know.", "Talk to me.",
    "Give me a quote about life.", "Tell me a fortune about work.", "Say something about computers.",
    "Any wisdom about love?", "What do you know about science?", "Give me a quote about wisdom.",
};
static const char *const followups[] = {"Another one.", "Tell me another.", "One more, please.", "More!", "Again."};
static const char *const systems[] = {"You are a fortune cookie.", "You are a helpful assistant.",
                                      "You are a wise old oracle who speaks in fortunes."};

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Render messages[0..n) (+ a generation prompt) with the chat template and tokenize. */
static int render_ids(const q35_tokenizer *tok, cJSON *msgs, int32_t **ids, size_t *n) {
    char *json = cJSON_PrintUnformatted(msgs), *text = NULL;
    q35_chat_opts o = {.add_generation_prompt = 1, .enable_thinking = -1, .default_thinking = 0};
    int rc = !json || q35_chat_render(json, NULL, &o, &text) || q35_tokenize(tok, text, strlen(text), 1, ids, n);
    free(json);
    free(text);
    return rc ? -1 : 0;
}

static void add_msg(cJSON *msgs, const char *role, const char *content) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "role", role);
    cJSON_AddStringToObject(o, "content", content);
    cJSON_AddItemToArray(msgs, o);
}

/* A chat of the talker's training form, as long as fits in `target` tokens: an optional system
 * prompt, then turns (request, proverb, follow-up, proverb, ...), ending with a user turn and the
 * generation prompt. Deterministic in `seed`. *ids is malloc'd. */
static int talker_prompt(const q35_tokenizer *tok, int target, uint64_t seed, int32_t **ids, size_t *n) {
    uint64_t s = seed;
    cJSON *msgs = cJSON_CreateArray();
    if (splitmix(&s) % 4 == 0) add_msg(msgs, "system", systems[splitmix(&s) % 3]);
    add_msg(msgs, "user", requests[splitmix(&s) % (sizeof requests / sizeof requests[0])]);
    int32_t *best = NULL;
    size_t best_n = 0;
    if (render_ids(tok, msgs, &best, &best_n)) {
        cJSON_Delete(msgs);
        return -1;
    }
    /* Grow by whole turns (~25 tokens each) while the chat fits; halve the step on overshoot. */
    int pi = (int)(splitmix(&s) % N_PROVERBS);
    int step = (target - (int)best_n) / 30 > 1 ? (target - (int)best_n) / 30 : 1;
    while ((int)best_n < target) {
        cJSON *grown = cJSON_Duplicate(msgs, 1);
        for (int k = 0; k < step; k++) {
            pi = (pi + 1 + (int)(splitmix(&s) % 7)) % N_PROVERBS;
            add_msg(grown, "assistant", proverbs[pi]);
            const int r = (int)(splitmix(&s) % 3);
            add_msg(grown, "user", r == 0 ? followups[splitmix(&s) % 5] : requests[splitmix(&s) % (sizeof requests / sizeof requests[0])]);
        }
        int32_t *g_ids;
        size_t g_n;
        if (render_ids(tok, grown, &g_ids, &g_n)) {
            cJSON_Delete(grown);
            break;
        }
        if ((int)g_n > target) {
            free(g_ids);
            cJSON_Delete(grown);
            if (step == 1) break;
            step /= 2;
            continue;
        }
        cJSON_Delete(msgs);
        msgs = grown;
        free(best);
        best = g_ids;
        best_n = g_n;
        step = (target - (int)best_n) / 30 > 1 ? (target - (int)best_n) / 30 : 1;
    }
    cJSON_Delete(msgs);
    *ids = best;
    *n = best_n;
    return 0;
}

/* ------------------------------------------------------------------ variants */
/* A variant is a model to compare with the full-precision one. The first three are the load-time
 * formats (q35_model_load_ex --weights q8 | q4 | q4_0); --ablation adds models that mix full-
 * precision tensors with quantized ones, to tell which tensors and which part of the product (the
 * weights, or the 8-bit activations the integer kernels use) the error comes from. */
#define MAX_VARIANTS 24
enum { G_LAYERS = 1, G_AB = 2, G_HEAD = 4, G_EMBED = 8, G_ALL = 15 }; /* G_AB: in_proj_a / in_proj_b */

typedef struct variant {
    char label[96];
    q35_model *m;
    int owned;                /* 1: a mixed model this file made (freed before the models it borrows from) */
    int bf16dot;              /* 1: run with q35_matmul_set_bf16_dot(1) (bf16 weights x bf16-rounded activations) */
    q35_kv_type kv_type;      /* the KV cache of its sessions */
} variant;

static int own_buf(q35_model *m, void *p) {
    if (m->n_owned == m->cap_owned) {
        const int cap = m->cap_owned ? 2 * m->cap_owned : 64;
        void **v = realloc(m->owned, sizeof *v * (size_t)cap);
        if (!v) return -1;
        m->owned = v;
        m->cap_owned = cap;
    }
    m->owned[m->n_owned++] = p;
    return 0;
}

/* *d := src (shared), or (copy) a float32 copy of src's values, rounded through dtype `via` first
 * unless via is F32. */
static int take_tensor(q35_model *m, q35_tensor *d, const q35_tensor *src, int copy, q35_dtype via) {
    const q35_tensor s = *src;
    if (!s.data || s.ndim != 2) return 0;
    if (!copy) {
        *d = s;
        return 0;
    }
    const int64_t rows = s.shape[0], cols = s.shape[1];
    if (via != Q35_DT_F32 && !q35_quant_supports(via, cols)) return -1;
    /* the model frees what it owns with q35_huge_free */
    float *buf = q35_huge_alloc(sizeof(float) * (size_t)(rows * cols));
    uint8_t *qb = malloc(q35_row_bytes(via, cols) + 64);
    if (!buf || !qb || own_buf(m, buf)) {
        q35_huge_free(buf);
        free(qb);
        return -1;
    }
    for (int64_t r = 0; r < rows; r++) {
        float *row = buf + r * cols;
        q35_tensor_dequant_row(&s, r, row);
        if (via != Q35_DT_F32 && (q35_quantize_row(via, row, qb, cols) || q35_dequantize_row(via, qb, row, cols))) {
            free(qb);
            return -1;
        }
    }
    free(qb);
    *d = s;
    d->dtype = Q35_DT_F32;
    d->data = buf;
    d->nbytes = sizeof(float) * (size_t)(rows * cols);
    d->layout = Q35_LAYOUT_ROWS;
    return 0;
}

/* The checkpoint at full precision with the tensors of `groups` taken from src (NULL: its own,
 * for a round trip through `via`). */
static q35_model *mixed(const char *dir, const q35_model *src, int groups, int copy, q35_dtype via) {
    q35_model *m;
    if (q35_model_load(dir, &m)) return NULL;
    if (!src) src = m;
    int bad = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        q35_layer_weights *L = &m->layers[i];
        const q35_layer_weights *S = &src->layers[i];
        q35_tensor *d[] = {&L->mlp_gate, &L->mlp_up, &L->mlp_down, &L->attn.q, &L->attn.k, &L->attn.v, &L->attn.o, &L->gdn.in_qkv, &L->gdn.in_z, &L->gdn.out};
        const q35_tensor *s[] = {&S->mlp_gate, &S->mlp_up, &S->mlp_down, &S->attn.q, &S->attn.k, &S->attn.v, &S->attn.o, &S->gdn.in_qkv, &S->gdn.in_z, &S->gdn.out};
        if (groups & G_LAYERS)
            for (size_t k = 0; k < sizeof d / sizeof d[0]; k++) bad |= take_tensor(m, d[k], s[k], copy, via);
        if (groups & G_AB) {
            bad |= take_tensor(m, &L->gdn.in_a, &S->gdn.in_a, copy, via);
            bad |= take_tensor(m, &L->gdn.in_b, &S->gdn.in_b, copy, via);
        }
    }
    const q35_tensor head = src->lm_head, embed = src->embed;
    if (groups & G_HEAD) bad |= take_tensor(m, &m->lm_head, &head, copy, via);
    if (groups & G_EMBED) bad |= take_tensor(m, &m->embed, &embed, copy, via);
    if (bad) {
        q35_model_free(m);
        return NULL;
    }
    return m;
}

/* Weight-level error of each format on the tensors of one kind, over every layer: relative RMS
 * error ||W - deq(q(W))|| / ||W||, and the excess kurtosis of W (0 for a Gaussian, -1.2 for the
 * uniform weights of the synthetic checkpoints): a rotation makes a block's values close to
 * Gaussian, which helps heavy-tailed (trained) rows and hurts uniform ones. */
static void weight_error_table(const char *name, const q35_model *m) {
    static const char *const kinds[] = {"mlp gate/up", "mlp down", "attn q/k/v", "attn o", "gdn in_qkv/in_z", "gdn out", "gdn in_a/b", "LM head / embedding"};
    enum { NK = sizeof kinds / sizeof kinds[0] };
    static const q35_dtype dts[3] = {Q35_DT_Q8_0, Q35_DT_Q4_0, Q35_DT_Q4R};
    for (int k = 0; k < NK; k++) {
        double sw = 0, s2 = 0, s4 = 0, se[3] = {0}, n = 0;
        int ok[3] = {1, 1, 1};
        long long cols_seen = -1;
        for (int i = 0; i <= m->cfg.n_layers; i++) {
            const q35_tensor *ts[4] = {0};
            if (i == m->cfg.n_layers) {
                if (k == NK - 1) ts[0] = &m->lm_head;
            } else {
                const q35_layer_weights *L = &m->layers[i];
                switch (k) {
                case 0: ts[0] = &L->mlp_gate; ts[1] = &L->mlp_up; break;
                case 1: ts[0] = &L->mlp_down; break;
                case 2: ts[0] = &L->attn.q; ts[1] = &L->attn.k; ts[2] = &L->attn.v; break;
                case 3: ts[0] = &L->attn.o; break;
                case 4: ts[0] = &L->gdn.in_qkv; ts[1] = &L->gdn.in_z; break;
                case 5: ts[0] = &L->gdn.out; break;
                case 6: ts[0] = &L->gdn.in_a; ts[1] = &L->gdn.in_b; break;
                default: break;
                }
            }
            for (int t = 0; t < 4 && ts[t]; t++) {
                const q35_tensor *W = ts[t];
                if (!W->data || W->ndim != 2) continue;
                const int64_t rows = W->shape[0], cols = W->shape[1];
                cols_seen = cols;
                float *x = malloc(sizeof(float) * (size_t)cols), *y = malloc(sizeof(float) * (size_t)cols);
                uint8_t *qb = malloc(sizeof(float) * (size_t)cols);
                for (int64_t r = 0; r < rows; r++) {
                    q35_tensor_dequant_row(W, r, x);
                    for (int64_t c = 0; c < cols; c++) {
                        const double v = x[c];
                        sw += v, s2 += v * v, s4 += v * v * v * v, n++;
                    }
                    for (int d = 0; d < 3; d++) {
                        if (!ok[d] || !q35_quant_supports(dts[d], cols)) {
                            ok[d] = 0;
                            continue;
                        }
                        q35_quantize_row(dts[d], x, qb, cols);
                        q35_dequantize_row(dts[d], qb, y, cols);
                        for (int64_t c = 0; c < cols; c++) se[d] += (double)(y[c] - x[c]) * (y[c] - x[c]);
                    }
                }
                free(x);
                free(y);
                free(qb);
            }
        }
        if (n == 0) continue;
        const double mean = sw / n, var = s2 / n - mean * mean;
        const double kurt = (s4 / n) / (var * var) - 3; /* mean ~ 0 */
        char e[3][32];
        for (int d = 0; d < 3; d++) {
            if (ok[d]) snprintf(e[d], sizeof e[d], "%.4f", sqrt(se[d] / s2));
            else snprintf(e[d], sizeof e[d], "- (%lld columns)", cols_seen);
        }
        printf("| %s | %s | %.2f | %s | %s | %s |\n", name, kinds[k], kurt, e[0], e[1], e[2]);
    }
}

/* ------------------------------------------------------------------ measurement */
typedef struct fixture {
    const char *name;
    int talker;               /* 1: chat prompts rendered and tokenized with its tokenizer; 0: random ids */
    int lens[N_PROMPTS];      /* target prompt lengths (tokens) */
} fixture;

static const fixture fixtures[] = {
    {"talker", 1, {18, 64, 96, 192, 384, 768, 1280, 2048, 3072, 4000}},
    {"tiny-vl", 0, {1, 3, 8, 20, 50, 120, 300, 700, 1500, 3000}},
    {"narrow8", 0, {1, 3, 8, 20, 50, 120, 300, 700, 1500, 3000}},
    {"hv-gt-hk", 0, {1, 3, 8, 20, 50, 120, 300, 700, 1500, 3000}},
    {"shape08b", 0, {1, 2, 4, 8, 16, 32, 64, 128, 256, 512}},
};
#define N_FIXTURES ((int)(sizeof fixtures / sizeof fixtures[0]))

typedef struct pstat {
    int T;                    /* prompt tokens */
    int positions, agree;     /* positions compared (T + N_GEN - 1) and those with equal top-1 */
    int first_div;            /* first generated step whose token differs (-1: greedy equal) */
    float div_margin;         /* full-precision margin at that step */
    double kl_sum, kl_max;    /* KL(P_full || P_variant) in nats, summed and largest over positions */
    float dis_margin;         /* largest full-precision top-1 minus top-2 logit at a disagreement (0: none) */
    float logit_err;          /* largest |logit_variant - logit_full| */
} pstat;

typedef struct sweep_stat {   /* one fixture and variant, over the sweep */
    pstat p[N_PROMPTS];
    int n;                    /* prompts measured */
    double seconds;           /* evaluation time of the variant */
} sweep_stat;

static sweep_stat results[N_FIXTURES][MAX_VARIANTS];
static char labels[N_FIXTURES][MAX_VARIANTS][96];
static int n_variants[N_FIXTURES];
static float fixture_min_margin[N_FIXTURES];  /* smallest full-precision margin at any position */
static int fixture_ties[N_FIXTURES];          /* positions with a full-precision margin < 0.01 */
static int fixture_positions[N_FIXTURES];
static double fixture_seconds[N_FIXTURES];
static int n_prompts_run = N_PROMPTS;
static int verbose, ablation;

typedef struct ref {          /* the full-precision run of one prompt */
    int T, R;                 /* prompt tokens; rows = T + N_GEN - 1 */
    int32_t gen[N_GEN];       /* greedy continuation */
    float *logits;            /* [R][V] */
    double *lse;              /* [R] log-sum-exp of each row */
    int *top;                 /* [R] argmax */
    float *margin;            /* [R] top-1 minus top-2 logit */
} ref;

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

static double logsumexp(const float *x, int n) {
    float mx = x[0];
    for (int i = 1; i < n; i++) mx = x[i] > mx ? x[i] : mx;
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)x[i] - mx);
    return mx + log(s);
}

static float margin_of(const float *x, int n, int top) {
    float second = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != top && x[i] > second) second = x[i];
    return x[top] - second;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Full precision: the prompt at once, then N_GEN greedy tokens one by one. */
static int run_ref(q35_model *m, const int32_t *ids, int T, ref *r) {
    const int V = m->cfg.vocab;
    r->T = T;
    r->R = T + N_GEN - 1;
    r->logits = malloc(sizeof(float) * (size_t)r->R * V);
    r->lse = malloc(sizeof(double) * (size_t)r->R);
    r->top = malloc(sizeof(int) * (size_t)r->R);
    r->margin = malloc(sizeof(float) * (size_t)r->R);
    q35_session *s;
    if (!r->logits || !r->lse || !r->top || !r->margin || q35_session_new(m, T + N_GEN, &s)) return -1;
    int rc = q35_session_eval(s, ids, T, NULL, r->logits);
    for (int g = 0; !rc && g < N_GEN; g++) {
        r->gen[g] = argmax(r->logits + (size_t)(T - 1 + g) * V, V);
        if (g + 1 < N_GEN) rc = q35_session_eval(s, &r->gen[g], 1, r->logits + (size_t)(T + g) * V, NULL);
    }
    q35_session_free(s);
    for (int j = 0; j < r->R; j++) {
        const float *x = r->logits + (size_t)j * V;
        r->lse[j] = logsumexp(x, V);
        r->top[j] = argmax(x, V);
        r->margin[j] = margin_of(x, V, r->top[j]);
    }
    return rc ? -1 : 0;
}

static void free_ref(ref *r) {
    free(r->logits);
    free(r->lse);
    free(r->top);
    free(r->margin);
}

/* A variant on the same prompt and the same (full-precision) continuation. */
static int run_variant(q35_model *m, q35_kv_type kv_type, const int32_t *ids, const ref *r, float *row_buf, pstat *ps, const char *what) {
    const int V = m->cfg.vocab, T = r->T;
    memset(ps, 0, sizeof *ps);
    ps->T = T;
    ps->first_div = -1;
    q35_session *s;
    if (q35_session_new_ex(m, &(q35_session_opts){T + N_GEN, kv_type}, &s)) return -1;
    float *all = malloc(sizeof(float) * (size_t)T * V);
    int rc = !all || q35_session_eval(s, ids, T, NULL, all);
    for (int j = 0; !rc && j < r->R; j++) {
        const float *q;
        if (j < T) {
            q = all + (size_t)j * V;
        } else {
            if (q35_session_eval(s, &r->gen[j - T], 1, row_buf, NULL)) {
                rc = 1;
                break;
            }
            q = row_buf;
        }
        const float *p = r->logits + (size_t)j * V;
        const double lse_q = logsumexp(q, V), lse_p = r->lse[j];
        double kl = 0;
        float err = 0;
        for (int i = 0; i < V; i++) {
            const double lp = p[i] - lse_p, lq = q[i] - lse_q;
            kl += exp(lp) * (lp - lq);
            err = fabsf(q[i] - p[i]) > err ? fabsf(q[i] - p[i]) : err;
        }
        kl = kl > 0 ? kl : 0;
        ps->kl_sum += kl;
        ps->kl_max = kl > ps->kl_max ? kl : ps->kl_max;
        ps->logit_err = err > ps->logit_err ? err : ps->logit_err;
        ps->positions++;
        const int qt = argmax(q, V);
        if (qt == r->top[j]) {
            ps->agree++;
        } else {
            ps->dis_margin = r->margin[j] > ps->dis_margin ? r->margin[j] : ps->dis_margin;
            if (j >= T - 1 && ps->first_div < 0) {
                ps->first_div = j - (T - 1);
                ps->div_margin = r->margin[j];
            }
            if (verbose)
                printf("#   %s, %s %d: full-precision top %d (margin %.4g over the next), variant's top %d (%.4g above the full-precision top)\n", what,
                       j < T ? "prompt position" : "generated position", j, r->top[j], r->margin[j], qt, q[qt] - q[r->top[j]]);
        }
    }
    free(all);
    q35_session_free(s);
    return rc ? -1 : 0;
}

static void random_ids(const char *name, int p, int T, int V, int32_t *ids) {
    uint64_t s = q35_fnv1a64(name, strlen(name), Q35_FNV_OFFSET) ^ (uint64_t)(p + 1) * 0x2545F4914F6CDD1Dull;
    for (int t = 0; t < T; t++) ids[t] = (int32_t)(splitmix(&s) % (uint64_t)V);
}

static void add_variant_kv(int fi, variant *v, q35_model *m, int owned, const char *label, q35_kv_type kv_type) {
    if (!m) {
        if (owned) printf("# %s: variant '%s' skipped (%s)\n", fixtures[fi].name, label, "a tensor's columns do not fit the format");
        return;
    }
    if (n_variants[fi] == MAX_VARIANTS) {
        CHECK(0, "more than %d variants", MAX_VARIANTS);
        if (owned) q35_model_free(m);
        return;
    }
    variant *x = &v[n_variants[fi]];
    x->m = m;
    x->owned = owned;
    x->bf16dot = 0;
    x->kv_type = kv_type;
    snprintf(x->label, sizeof x->label, "%s", label);
    snprintf(labels[fi][n_variants[fi]], sizeof labels[fi][0], "%s", label);
    n_variants[fi]++;
}

static void add_variant(int fi, variant *v, q35_model *m, int owned, const char *label) { add_variant_kv(fi, v, m, owned, label, Q35_KV_F32); }

static void measure_fixture(int fi) {
    const fixture *fx = &fixtures[fi];
    const double t_start = now_s();
    char src[4096], dir[4096];
    snprintf(src, sizeof src, "%s/models/%s", test_data_dir(), fx->name);
    if (prepare_model(src, fx->name, dir, sizeof dir)) {
        CHECK(0, "%s: cannot prepare the checkpoint", fx->name);
        return;
    }
    q35_model *full = NULL, *q[3] = {0};
    q35_tokenizer *tok = NULL;
    variant v[MAX_VARIANTS];
    if (q35_model_load(dir, &full)) {
        CHECK(0, "%s: %s", fx->name, q35_last_error());
        return;
    }
    for (int f = 0; f < 3; f++) {
        static const char *const fmt[3] = {"q8", "q4", "q4_0"};
        q35_load_opts o = {.weights = fmt[f]};
        if (q35_model_load_ex(dir, &o, &q[f])) {
            CHECK(0, "%s --weights %s: %s", fx->name, fmt[f], q35_last_error());
            q35_model_free(full);
            for (int k = 0; k < f; k++) q35_model_free(q[k]);
            return;
        }
        add_variant(fi, v, q[f], 0, fmt[f]);
    }
    add_variant_kv(fi, v, full, 0, "full precision, f16 KV cache", Q35_KV_F16); /* the 4th: --kv-cache f16 */
    if (ablation) {
        /* calibration: the full-precision values through other arithmetic */
        add_variant(fi, v, mixed(dir, NULL, G_ALL, 1, Q35_DT_F32), 1, "bf16 values as f32 (f32 kernels: summation order only)");
        add_variant(fi, v, mixed(dir, NULL, 0, 0, Q35_DT_F32), 1, "bf16 weights x bf16-rounded activations (Q35_BF16_DOT=1)");
        if (n_variants[fi] > 0) v[n_variants[fi] - 1].bf16dot = 1;
        add_variant(fi, v, mixed(dir, q[0], G_ALL, 1, Q35_DT_F32), 1, "q8 weights, f32 activations");
        add_variant(fi, v, mixed(dir, q[1], G_ALL, 1, Q35_DT_F32), 1, "q4 weights, f32 activations");
        add_variant(fi, v, mixed(dir, q[2], G_ALL, 1, Q35_DT_F32), 1, "q4_0 weights, f32 activations");
        add_variant(fi, v, mixed(dir, q[0], G_LAYERS | G_AB, 0, Q35_DT_F32), 1, "q8 layers only (head, embedding full)");
        add_variant(fi, v, mixed(dir, q[1], G_LAYERS | G_AB, 0, Q35_DT_F32), 1, "q4 layers only (head, embedding full)");
        add_variant(fi, v, mixed(dir, q[2], G_LAYERS | G_AB, 0, Q35_DT_F32), 1, "q4_0 layers only (head, embedding full)");
        /* q8 keeps the head and embedding as stored, so these round-trip them through Q8_0 here */
        add_variant(fi, v, mixed(dir, NULL, G_HEAD, 1, Q35_DT_Q8_0), 1, "LM head Q8_0 only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_EMBED, 1, Q35_DT_Q8_0), 1, "embedding Q8_0 only");
        add_variant(fi, v, mixed(dir, NULL, G_HEAD, 1, Q35_DT_Q4_0), 1, "LM head Q4_0 only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_HEAD, 1, Q35_DT_Q4R), 1, "LM head Q4R only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_HEAD, 1, Q35_DT_Q6_K), 1, "LM head Q6_K only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_LAYERS, 1, Q35_DT_Q4_0), 1, "layer matrices Q4_0 only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_LAYERS, 1, Q35_DT_Q4R), 1, "layer matrices Q4R only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_LAYERS, 1, Q35_DT_Q4_K), 1, "layer matrices Q4_K only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_AB, 1, Q35_DT_Q8_0), 1, "in_proj_a/b Q8_0 only (f32 activations)");
        add_variant(fi, v, mixed(dir, NULL, G_AB, 1, Q35_DT_Q4_0), 1, "in_proj_a/b Q4_0 only (f32 activations)");
    }
    if (fx->talker && q35_tokenizer_load(dir, &tok)) CHECK(0, "%s: %s", fx->name, q35_last_error());
    const int V = full->cfg.vocab;
    float *row = malloc(sizeof(float) * (size_t)V);
    fixture_min_margin[fi] = INFINITY;
    for (int p = 0; p < n_prompts_run; p++) {
        int32_t *ids = NULL;
        size_t T = 0;
        if (fx->talker) {
            if (!tok || talker_prompt(tok, fx->lens[p], 1000 + (uint64_t)p, &ids, &T)) {
                CHECK(0, "%s: prompt %d: %s", fx->name, p, q35_last_error());
                break;
            }
        } else {
            T = (size_t)fx->lens[p];
            ids = malloc(sizeof(int32_t) * T);
            random_ids(fx->name, p, (int)T, V, ids);
        }
        ref r = {0};
        if (run_ref(full, ids, (int)T, &r)) {
            CHECK(0, "%s prompt %d (full precision): %s", fx->name, p, q35_last_error());
            free_ref(&r);
            free(ids);
            break;
        }
        for (int j = 0; j < r.R; j++) {
            fixture_min_margin[fi] = r.margin[j] < fixture_min_margin[fi] ? r.margin[j] : fixture_min_margin[fi];
            fixture_ties[fi] += r.margin[j] < 0.01f;
        }
        fixture_positions[fi] += r.R;
        for (int k = 0; k < n_variants[fi]; k++) {
            char what[192];
            snprintf(what, sizeof what, "%.64s %.95s prompt %d", fx->name, v[k].label, p);
            const double t0 = now_s();
            const int old = v[k].bf16dot ? q35_matmul_set_bf16_dot(1) : 0;
            if (run_variant(v[k].m, v[k].kv_type, ids, &r, row, &results[fi][k].p[p], what)) CHECK(0, "%s: %s", what, q35_last_error());
            if (v[k].bf16dot) q35_matmul_set_bf16_dot(old);
            results[fi][k].seconds += now_s() - t0;
            results[fi][k].n = p + 1;
        }
        free_ref(&r);
        free(ids);
    }
    free(row);
    q35_tokenizer_free(tok);
    for (int k = 0; k < n_variants[fi]; k++)
        if (v[k].owned) q35_model_free(v[k].m);
    for (int f = 0; f < 3; f++) q35_model_free(q[f]);
    q35_model_free(full);
    fixture_seconds[fi] = now_s() - t_start;
}

/* ------------------------------------------------------------------ summaries */
typedef struct summary {
    int prompts, greedy_equal, positions, agree;
    double kl_mean, kl_max;   /* mean over every position of every prompt; largest */
    float dis_margin;         /* largest full-precision margin at a disagreement */
    float logit_err;
} summary;

static summary summarize(int fi, int k) {
    summary s = {0};
    double kl = 0;
    for (int p = 0; p < results[fi][k].n; p++) {
        const pstat *ps = &results[fi][k].p[p];
        s.prompts++;
        s.greedy_equal += ps->first_div < 0;
        s.positions += ps->positions;
        s.agree += ps->agree;
        kl += ps->kl_sum;
        s.kl_max = ps->kl_max > s.kl_max ? ps->kl_max : s.kl_max;
        s.dis_margin = ps->dis_margin > s.dis_margin ? ps->dis_margin : s.dis_margin;
        s.logit_err = ps->logit_err > s.logit_err ? ps->logit_err : s.logit_err;
    }
    s.kl_mean = s.positions ? kl / s.positions : 0;
    return s;
}

static void summary_row(int fi, int k, const char *first) {
    const summary s = summarize(fi, k);
    char dm[32];
    if (s.agree == s.positions) snprintf(dm, sizeof dm, "-");
    else snprintf(dm, sizeof dm, "%.3g", s.dis_margin);
    printf("| %s | %s | %d/%d | %d/%d (%.2f%%) | %.2e | %.2e | %s | %.3g |\n", first, labels[fi][k], s.greedy_equal, s.prompts, s.agree, s.positions,
           100.0 * s.agree / (s.positions ? s.positions : 1), s.kl_mean, s.kl_max, dm, s.logit_err);
}

#define SUMMARY_HEAD                                                                                                            \
    "| %s | weights | greedy 32 equal | top-1 agreement | mean KL | max KL | largest full-precision margin at a disagreement | " \
    "max abs logit error |\n|---|---|---|---|---|---|---|---|\n"

static void print_tables(void) {
    printf("\n### Summary\n\n" SUMMARY_HEAD, "checkpoint");
    for (int fi = 0; fi < N_FIXTURES; fi++)
        for (int k = 0; k < 4 && k < n_variants[fi]; k++) summary_row(fi, k, fixtures[fi].name);
    printf("\nFull-precision near ties (top-1 minus top-2 logit < 0.01) among the compared positions:\n\n");
    for (int fi = 0; fi < N_FIXTURES; fi++)
        printf("- %s: %d of %d positions (smallest margin %.2g)\n", fixtures[fi].name, fixture_ties[fi], fixture_positions[fi], fixture_min_margin[fi]);
    if (ablation) {
        printf("\n### Weight error per tensor kind (relative RMS error; excess kurtosis of the weights)\n\n");
        printf("| checkpoint | tensors | excess kurtosis | Q8_0 | Q4_0 | Q4R |\n|---|---|---|---|---|---|\n");
        for (int fi = 0; fi < N_FIXTURES; fi++) {
            char src[4096], dir[4096];
            q35_model *m;
            snprintf(src, sizeof src, "%s/models/%s", test_data_dir(), fixtures[fi].name);
            if (prepare_model(src, fixtures[fi].name, dir, sizeof dir) || q35_model_load(dir, &m)) continue;
            weight_error_table(fixtures[fi].name, m);
            q35_model_free(m);
        }
        for (int fi = 0; fi < N_FIXTURES; fi++) {
            printf("\n### Where the error comes from: %s\n\n" SUMMARY_HEAD, fixtures[fi].name, "checkpoint");
            for (int k = 0; k < n_variants[fi]; k++) summary_row(fi, k, fixtures[fi].name);
        }
    }
    for (int fi = 0; fi < N_FIXTURES; fi++) {
        printf("\n### Per prompt: %s\n\n", fixtures[fi].name);
        printf("| prompt tokens | weights | greedy 32 equal | top-1 agreement | mean KL | max KL | largest full-precision margin at a disagreement | max abs logit error |\n");
        printf("|---|---|---|---|---|---|---|---|\n");
        for (int p = 0; p < results[fi][0].n; p++)
            for (int k = 0; k < 4 && k < n_variants[fi]; k++) {
                const pstat *ps = &results[fi][k].p[p];
                char ge[32], dm[32];
                if (ps->first_div < 0) snprintf(ge, sizeof ge, "yes");
                else snprintf(ge, sizeof ge, "no (token %d)", ps->first_div + 1);
                if (ps->agree == ps->positions) snprintf(dm, sizeof dm, "-");
                else snprintf(dm, sizeof dm, "%.3g", ps->dis_margin);
                printf("| %d | %s | %s | %d/%d | %.2e | %.2e | %s | %.3g |\n", ps->T, labels[fi][k], ge, ps->agree, ps->positions,
                       ps->kl_sum / ps->positions, ps->kl_max, dm, ps->logit_err);
            }
    }
    printf("\n");
}

/* ------------------------------------------------------------------ bounds */
/* Measured with the full sweep (docs/quantization.md; AVX-512 kernels, 2 threads). The test keeps
 * each figure within: greedy-equal prompts >= measured - 1 (a near tie may fall either way on
 * another ISA), top-1 agreement >= measured - 0.5 points (q8) or 1 point (4-bit), mean KL within
 * [measured / 3, 1.5 x measured], max KL <= 2 x measured. A figure better than the lower end means
 * the tables in docs/quantization.md are stale: measure again and update both. */
typedef struct bound {
    const char *fixture;
    int k;                    /* 0 q8, 1 q4, 2 q4_0, 3 full-precision weights with an f16 KV cache */
    int greedy;               /* prompts whose 32 greedy tokens equal the full-precision ones */
    int agree, positions;     /* top-1 agreement */
    double kl_mean, kl_max;
} bound;

static const bound bounds[] = {
    {"talker", 0, 10, 12084, 12175, 1.56e-04, 8.58e-03},
    {"talker", 1, 4, 11502, 12175, 1.23e-02, 5.97e-01},
    {"talker", 2, 3, 11432, 12175, 1.38e-02, 1.18e+00},
    {"tiny-vl", 0, 0, 5506, 6012, 5.71e-04, 1.64e-02},
    {"tiny-vl", 1, 0, 2389, 6012, 4.42e-02, 3.28e-01},
    {"tiny-vl", 2, 0, 2389, 6012, 4.42e-02, 3.28e-01},
    {"narrow8", 0, 0, 4876, 6012, 2.21e-03, 6.42e-02},
    {"narrow8", 1, 0, 775, 6012, 1.09e-01, 3.25e-01},
    {"narrow8", 2, 0, 775, 6012, 1.09e-01, 3.25e-01},
    {"hv-gt-hk", 0, 0, 5532, 6012, 5.17e-04, 1.13e-02},
    {"hv-gt-hk", 1, 1, 2512, 6012, 4.20e-02, 2.80e-01},
    {"hv-gt-hk", 2, 1, 2512, 6012, 4.20e-02, 2.80e-01},
    {"shape08b", 0, 0, 1201, 1333, 4.57e-04, 1.00e-03},
    {"shape08b", 1, 0, 437, 1333, 3.83e-02, 7.03e-02},
    {"shape08b", 2, 0, 437, 1333, 3.83e-02, 7.03e-02},
    /* the f16 KV cache (full-precision weights): the rounding of keys and values alone */
    {"talker", 3, 10, 12174, 12175, 9.32e-09, 3.53e-06},
    {"tiny-vl", 3, 10, 6012, 6012, 4.98e-11, 3.91e-09},
    {"narrow8", 3, 10, 6012, 6012, 4.03e-10, 7.77e-08},
    {"hv-gt-hk", 3, 10, 6010, 6012, 4.89e-11, 3.45e-09},
    {"shape08b", 3, 10, 1333, 1333, 2.53e-10, 4.35e-09},
};

/* On the talker, q8 flips only close calls: every disagreement has a full-precision margin below
 * TALKER_Q8_MAX_MARGIN (measured: 0.13), and a greedy continuation departs only where the
 * full-precision margin is below NEAR_TIE (measured: 0.003 and 0.011 with the AVX-512 kernels,
 * 0.023 and 0.050 with the scalar ones; q8's logit error reaches 0.3-0.4). */
#define TALKER_Q8_MAX_MARGIN 0.2f
#define NEAR_TIE 0.1f

static int fixture_index(const char *name) {
    for (int fi = 0; fi < N_FIXTURES; fi++)
        if (!strcmp(fixtures[fi].name, name)) return fi;
    return -1;
}

static void check_bounds(int fi) {
    for (size_t b = 0; b < sizeof bounds / sizeof bounds[0]; b++) {
        const bound *B = &bounds[b];
        if (strcmp(B->fixture, fixtures[fi].name) || B->k >= n_variants[fi]) continue;
        const summary s = summarize(fi, B->k);
        const char *what = labels[fi][B->k];
        const double agree = (double)s.agree / s.positions, measured = (double)B->agree / B->positions;
        const double slack = B->k == 1 || B->k == 2 ? 0.02 : 0.01;
        CHECK(s.positions == B->positions, "%s %s: %d positions compared, the sweep had %d", fixtures[fi].name, what, s.positions, B->positions);
        CHECK(s.greedy_equal >= B->greedy - 2, "%s %s: greedy equal on %d/%d prompts, measured %d", fixtures[fi].name, what, s.greedy_equal, s.prompts, B->greedy);
        /* The bar: at 8 bits the trained model's greedy continuations all equal full
         * precision (measured with the AVX-512 kernels; other ISAs round activations differently). */
        if (!strcmp(B->fixture, "talker") && B->k == 0 && q35_isa_get() == Q35_ISA_AVX512)
            CHECK(s.greedy_equal == s.prompts, "talker q8: greedy equal on %d/%d prompts, every one expected", s.greedy_equal, s.prompts);
        CHECK(agree >= measured - slack, "%s %s: top-1 agreement %.4f, measured %.4f", fixtures[fi].name, what, agree, measured);
        CHECK(s.kl_mean <= 1.5 * B->kl_mean, "%s %s: mean KL %.3g, measured %.3g", fixtures[fi].name, what, s.kl_mean, B->kl_mean);
        CHECK(s.kl_max <= 2.0 * B->kl_max, "%s %s: max KL %.3g, measured %.3g", fixtures[fi].name, what, s.kl_max, B->kl_max);
        CHECK(s.kl_mean >= B->kl_mean / 3, "%s %s: mean KL %.3g is far below the %.3g measured: update docs/quantization.md and the bounds",
              fixtures[fi].name, what, s.kl_mean, B->kl_mean);
    }
    if (!strcmp(fixtures[fi].name, "talker") && n_variants[fi] > 0) {
        for (int p = 0; p < results[fi][0].n; p++) {
            const pstat *ps = &results[fi][0].p[p];
            if (ps->first_div >= 0)
                printf("# talker q8 prompt %d (%d tokens): greedy departs at token %d, a near tie (full-precision margin %.3g)\n", p, ps->T,
                       ps->first_div + 1, ps->div_margin);
            CHECK(ps->agree == ps->positions || ps->dis_margin < TALKER_Q8_MAX_MARGIN,
                  "talker q8 prompt %d: a top-1 disagreement where the full-precision margin is %.3g", p, ps->dis_margin);
            CHECK(ps->first_div < 0 || ps->div_margin < NEAR_TIE, "talker q8 prompt %d: greedy departs at token %d where the full-precision margin is %.3g",
                  p, ps->first_div + 1, ps->div_margin);
        }
    }
}

/* q35's 4-bit format against GGUF Q4_0 at the same bytes, on the model outputs. */
static void q4r_vs_q4_0(void) {
    const int fi = fixture_index("talker");
    if (fi < 0 || n_variants[fi] < 3) {
        CHECK(0, "talker not measured");
        return;
    }
    const summary r = summarize(fi, 1), z = summarize(fi, 2);
    printf("# talker mean KL: q4 (Q4R) %.3g, q4_0 %.3g; max KL %.3g vs %.3g\n", r.kl_mean, z.kl_mean, r.kl_max, z.kl_max);
    CHECK(r.kl_mean < z.kl_mean, "talker: Q4R mean KL %.3g is not below Q4_0's %.3g", r.kl_mean, z.kl_mean);
    const int si = fixture_index("shape08b");
    if (si >= 0 && n_variants[si] >= 3) {
        const summary a = summarize(si, 1), b = summarize(si, 2);
        /* Not asserted: on uniform random weights Q4_0 wins (see q4r_weight_error and the docs). */
        printf("# shape08b mean KL: q4 (Q4R) %.3g, q4_0 %.3g\n", a.kl_mean, b.kl_mean);
    }
}

/* The same comparison on the weights themselves: relative RMS error of each format over every
 * talker matrix Q4R can encode (trained weights, near-Gaussian), and over rows with the heavy
 * tails of real LLM weights (Gaussian with 0.5 % outliers at 10 sigma). Rotation spreads an
 * outlier over 128 values; on uniform rows (the synthetic fixtures) it costs instead. */
static double rel_err(q35_dtype dt, const float *x, int64_t rows, int64_t cols) {
    double se = 0, s2 = 0;
    float *y = malloc(sizeof(float) * (size_t)cols);
    uint8_t *qb = malloc(sizeof(float) * (size_t)cols);
    for (int64_t r = 0; r < rows; r++) {
        q35_quantize_row(dt, x + r * cols, qb, cols);
        q35_dequantize_row(dt, qb, y, cols);
        for (int64_t c = 0; c < cols; c++) {
            se += (double)(y[c] - x[r * cols + c]) * (y[c] - x[r * cols + c]);
            s2 += (double)x[r * cols + c] * x[r * cols + c];
        }
    }
    free(y);
    free(qb);
    return sqrt(se / s2);
}

static void q4r_weight_error(void) {
    char src[4096], dir[4096];
    snprintf(src, sizeof src, "%s/models/talker", test_data_dir());
    q35_model *m;
    if (prepare_model(src, "talker", dir, sizeof dir) || q35_model_load(dir, &m)) {
        CHECK(0, "talker: %s", q35_last_error());
        return;
    }
    double e4r = 0, e40 = 0;
    int n = 0;
    for (int i = 0; i < m->cfg.n_layers; i++) {
        const q35_layer_weights *L = &m->layers[i];
        const q35_tensor *ts[] = {&L->mlp_down, &L->attn.o, &L->gdn.out};
        for (int t = 0; t < 3; t++) {
            if (!ts[t]->data || !q35_quant_supports(Q35_DT_Q4R, ts[t]->shape[1])) continue;
            const int64_t rows = ts[t]->shape[0], cols = ts[t]->shape[1];
            float *x = malloc(sizeof(float) * (size_t)(rows * cols));
            for (int64_t r = 0; r < rows; r++) q35_tensor_dequant_row(ts[t], r, x + r * cols);
            const double a = rel_err(Q35_DT_Q4R, x, rows, cols), b = rel_err(Q35_DT_Q4_0, x, rows, cols);
            CHECK(a < b, "talker layer %d %s: Q4R relative error %.4f, Q4_0 %.4f", i, ts[t]->name, a, b);
            e4r += a, e40 += b, n++;
            free(x);
        }
    }
    q35_model_free(m);
    CHECK(n > 0, "no talker matrix has a multiple of 128 columns");
    /* heavy-tailed rows */
    enum { R = 64, C = 1024 };
    float *x = malloc(sizeof(float) * R * C);
    uint64_t s = 42;
    for (int i = 0; i < R * C; i++) {
        const double u1 = ((splitmix(&s) >> 11) + 0.5) * 0x1p-53, u2 = (splitmix(&s) >> 11) * 0x1p-53;
        double g = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        if (splitmix(&s) % 200 == 0) g *= 10;
        x[i] = (float)(0.02 * g);
    }
    const double h4r = rel_err(Q35_DT_Q4R, x, R, C), h40 = rel_err(Q35_DT_Q4_0, x, R, C);
    free(x);
    printf("# relative RMS weight error, Q4R vs Q4_0: talker (%d matrices) %.4f vs %.4f; heavy-tailed rows %.4f vs %.4f\n", n, n ? e4r / n : 0,
           n ? e40 / n : 0, h4r, h40);
    CHECK(h4r < 0.8 * h40, "heavy-tailed rows: Q4R relative error %.4f, Q4_0 %.4f", h4r, h40);
}

int main(int argc, char **argv) {
    int tables = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--tables")) tables = 1;
        else if (!strcmp(argv[i], "--verbose")) verbose = 1;
        else if (!strcmp(argv[i], "--ablation")) tables = ablation = 1;
    }
    const char *np = getenv("Q35_QUALITY_PROMPTS");
    if (np && atoi(np) > 0 && atoi(np) < N_PROMPTS) n_prompts_run = atoi(np);
    const double t0 = now_s();
    for (int fi = 0; fi < N_FIXTURES; fi++) {
        t_fail_count = 0;
        measure_fixture(fi);
        for (int k = 0; k < 4 && k < n_variants[fi]; k++) {
            const summary s = summarize(fi, k);
            printf("# %s %s: greedy equal %d/%d, top-1 agreement %d/%d, mean KL %.3g, max KL %.3g, largest full-precision margin at a "
                   "disagreement %.3g\n",
                   fixtures[fi].name, labels[fi][k], s.greedy_equal, s.prompts, s.agree, s.positions, s.kl_mean, s.kl_max, s.dis_margin);
        }
        printf("# %s: %.1f s\n", fixtures[fi].name, fixture_seconds[fi]);
        if (n_prompts_run == N_PROMPTS) check_bounds(fi);
        printf("%s quality_%s\n", t_fail_count ? "not ok" : "ok", fixtures[fi].name);
        if (t_fail_count) t_total_failed++;
    }
    if (n_prompts_run == N_PROMPTS) RUN(q4r_vs_q4_0);
    else printf("# Q35_QUALITY_PROMPTS=%d: bounds not checked\n", n_prompts_run);
    RUN(q4r_weight_error);
    if (tables) print_tables();
    printf("# total %.1f s\n", now_s() - t0);
    TEST_EXIT();
}
