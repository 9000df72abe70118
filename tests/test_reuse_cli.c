/* Prefix reuse and --session through the q35 binary ($Q35_BIN): chat answers are byte-identical
 * with reuse on and off (greedy and seeded sampling) while later turns resume from checkpoints; a
 * conversation split over runs with --session answers like one run; generate --session continues
 * in chat and raw mode; bad session files get one line on stderr, a non-zero status, and are not
 * overwritten. Prompt chunks of 16 (Q35_PROMPT_CHUNK) make the short test prompts span grid points. */
#include <sys/wait.h>

#include "core/file.h"
#include "test.h"

static char bin[1024], out_p[1100], err_p[1100], in_p[1100], sess_p[1100], talker[1100], tiny[1100], narrow[1100];

static int sh(const char *cmd) {
    char full[16384];
    snprintf(full, sizeof full, "Q35_PROMPT_CHUNK=16 %s", cmd);
    int st = system(full);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

static char *slurp(const char *path) {
    char *b;
    size_t n;
    if (q35_read_file(path, 1u << 26, &b, &n)) return strdup("");
    return b;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The largest "N of M prompt tokens reused" N on stderr. */
static int max_reused(const char *err) {
    int best = -1, n;
    for (const char *p = err; (p = strstr(p, "q35: ")); p++)
        if (sscanf(p, "q35: %d of", &n) == 1 && n > best) best = n;
    return best;
}

static char *chat(const char *input, const char *opts, char **err_out) {
    char cmd[8192];
    write_text(in_p, input);
    snprintf(cmd, sizeof cmd, "%s chat -m %s -n 24 %s < %s > %s 2> %s", bin, talker, opts, in_p, out_p, err_p);
    int rc = sh(cmd);
    char *err = slurp(err_p);
    CHECK(rc == 0, "chat %s: exit %d: %s", opts, rc, err);
    if (err_out) *err_out = err;
    else free(err);
    return slurp(out_p);
}

static const char *conversation = "Tell me a fortune.\nAnother one please.\nAnd a third.\nWhat about tomorrow?\nThank you.\n";

static void test_chat_same_with_reuse(void) {
    const char *modes[] = {"--greedy", "--temp 0.8 --seed 7", "--temp 1.2 --top-k 0 --seed 3"};
    for (int i = 0; i < 3; i++) {
        char on_opts[256], off_opts[256];
        snprintf(on_opts, sizeof on_opts, "%s", modes[i]);
        snprintf(off_opts, sizeof off_opts, "%s --no-reuse", modes[i]);
        char *err = NULL;
        char *on = chat(conversation, on_opts, &err), *off = chat(conversation, off_opts, NULL);
        CHECK(strlen(on) > 20 && !strcmp(on, off), "%s: answers differ with reuse:\n--- on\n%s\n--- off\n%s", modes[i], on, off);
        CHECK(max_reused(err) >= 32, "%s: no turn resumed from a checkpoint: %s", modes[i], err);
        free(on);
        free(off);
        free(err);
    }
    /* --cache-mib 0: only the session's own exact point; still the same answers. */
    char *a = chat(conversation, "--greedy --cache-mib 0", NULL), *b = chat(conversation, "--greedy --no-reuse", NULL);
    CHECK(!strcmp(a, b), "--cache-mib 0 changes the answers");
    free(a);
    free(b);
}

static void test_chat_session(void) {
    unlink(sess_p);
    char opts[2048];
    snprintf(opts, sizeof opts, "--temp 0.8 --seed 5 --session %s", sess_p);
    char *first = chat("Tell me a fortune.\nAnother one please.\n", opts, NULL);
    CHECK(q35_file_exists(sess_p), "no session file written");
    char *err = NULL;
    char *second = chat("And a third.\nWhat about tomorrow?\n", opts, &err);
    char *whole = chat("Tell me a fortune.\nAnother one please.\nAnd a third.\nWhat about tomorrow?\n", "--temp 0.8 --seed 5 --no-reuse", NULL);
    const size_t n1 = strlen(first);
    CHECK(n1 > 10 && !strncmp(whole, first, n1) && !strcmp(whole + n1, second), "split over --session runs:\n%s%s--- one run:\n%s", first,
          second, whole);
    CHECK(max_reused(err) >= 32, "the second run did not resume the loaded state: %s", err);
    free(first);
    free(second);
    free(whole);
    free(err);
}

static void test_generate_session(void) {
    char cmd[8192];
    /* Chat mode: two generate runs answer like a two-turn chat. */
    unlink(sess_p);
    snprintf(cmd, sizeof cmd, "%s generate -m %s -p 'Tell me a fortune.' --greedy -n 24 -q --session %s > %s 2> %s", bin, talker, sess_p, out_p,
             err_p);
    CHECK(sh(cmd) == 0, "generate 1: %s", slurp(err_p));
    char *g1 = slurp(out_p);
    snprintf(cmd, sizeof cmd, "%s generate -m %s -p 'Another one please.' --greedy -n 24 -q --session %s > %s 2> %s", bin, talker, sess_p,
             out_p, err_p);
    CHECK(sh(cmd) == 0, "generate 2: %s", slurp(err_p));
    char *g2 = slurp(out_p);
    char *c = chat("Tell me a fortune.\nAnother one please.\n", "--greedy --no-reuse", NULL);
    char both[8192];
    snprintf(both, sizeof both, "%s%s", g1, g2);
    CHECK(!strcmp(both, c), "generate --session twice:\n%s--- chat:\n%s", both, c);
    /* A chat-mode file refuses a raw continuation. */
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 1,2 --print-ids -n 2 --session %s > %s 2> %s", bin, talker, sess_p, out_p, err_p);
    int rc = sh(cmd);
    char *err = slurp(err_p);
    CHECK(rc == 1 && strstr(err, "q35-chat"), "raw run on a chat file: exit %d, %s", rc, err);
    free(err);
    free(g1);
    free(g2);
    free(c);
    /* Raw mode: ids X then Y continue like X + generated + Y at once. */
    unlink(sess_p);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24 --print-ids -n 6 --greedy -q "
             "--session %s > %s 2> %s", bin, tiny, sess_p, out_p, err_p);
    CHECK(sh(cmd) == 0, "raw 1: %s", slurp(err_p));
    char *r1 = slurp(out_p);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 30,31,32,33,34,35,36,37,38,39,40,41,42,43,44 --print-ids -n 6 --greedy -q --session %s > %s 2> %s",
             bin, tiny, sess_p, out_p, err_p);
    CHECK(sh(cmd) == 0, "raw 2: %s", slurp(err_p));
    char *r2 = slurp(out_p);
    char ids[4096] = "5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24";
    for (char *p = r1; *p;) {
        long v = strtol(p, &p, 10);
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), ",%ld", v);
        while (*p == ' ' || *p == '\n') p++;
    }
    strcat(ids, ",30,31,32,33,34,35,36,37,38,39,40,41,42,43,44");
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids %s --print-ids -n 6 --greedy -q --no-reuse > %s 2> %s", bin, tiny, ids, out_p, err_p);
    CHECK(sh(cmd) == 0, "raw at once: %s", slurp(err_p));
    char *r12 = slurp(out_p);
    CHECK(strlen(r1) > 2 && !strcmp(r2, r12), "raw continuation %s vs at once %s (ids %s)", r2, r12, ids);
    free(r1);
    free(r2);
    free(r12);
}

static long fsize(const char *p) {
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* Bad files: a non-zero status, one line naming the file and the problem, the file unchanged. */
static void test_bad_session_files(void) {
    char cmd[8192], bad[1200], copy[1200];
    snprintf(bad, sizeof bad, "%s.bad", sess_p);
    snprintf(copy, sizeof copy, "%s.copy", sess_p);
    unlink(sess_p);
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21 --print-ids -n 3 -q --session %s > %s 2> %s",
             bin, tiny, sess_p, out_p, err_p);
    CHECK(sh(cmd) == 0, "making a session file: %s", slurp(err_p));
    const long size = fsize(sess_p);
    struct {
        const char *what, *make, *model, *expect;
    } cases[] = {
        {"flipped byte", "cp S B && printf '\\377' | dd of=B bs=1 seek=%ld conv=notrunc 2>/dev/null", tiny, "checksum"},
        {"truncated", "head -c %ld S > B", tiny, "truncated"},
        {"other version", "cp S B && printf '\\011' | dd of=B bs=1 seek=8 conv=notrunc 2>/dev/null", tiny, "format version"},
        {"other model", "cp S B", narrow, "another model"},
        {"not a session file", "echo hello > B", tiny, "truncated"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char make[2048], mk[4096];
        snprintf(make, sizeof make, cases[k].make, k == 0 ? size / 2 : size - 10);
        /* S and B stand for the good and the bad file */
        size_t o = 0;
        for (const char *p = make; *p && o + 1200 < sizeof mk; p++) {
            if (*p == 'S' && (p[1] == ' ' || !p[1])) o += (size_t)snprintf(mk + o, sizeof mk - o, "%s", sess_p);
            else if (*p == 'B' && (p[1] == ' ' || !p[1])) o += (size_t)snprintf(mk + o, sizeof mk - o, "%s", bad);
            else mk[o++] = *p;
        }
        mk[o] = 0;
        CHECK(system(mk) == 0, "%s: %s", cases[k].what, mk);
        snprintf(cmd, sizeof cmd, "cp %s %s", bad, copy);
        CHECK(system(cmd) == 0, "%s", cmd);
        snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 1,2 --print-ids -n 2 --session %s > %s 2> %s", bin, cases[k].model, bad, out_p,
                 err_p);
        const int rc = sh(cmd);
        char *err = slurp(err_p);
        int lines = 0;
        for (char *p = err; *p; p++) lines += *p == '\n';
        CHECK(rc == 1 && lines == 1 && strstr(err, cases[k].expect) && strstr(err, bad), "%s: exit %d, stderr '%s'", cases[k].what, rc, err);
        snprintf(cmd, sizeof cmd, "cmp -s %s %s", bad, copy);
        CHECK(system(cmd) == 0, "%s: the file was changed", cases[k].what);
        free(err);
    }
    snprintf(cmd, sizeof cmd, "%s generate -m %s --prompt-ids 1,2 --cache-mib x > %s 2> %s", bin, tiny, out_p, err_p);
    CHECK(sh(cmd) == 2, "--cache-mib x accepted");
    unlink(bad);
    unlink(copy);
    unlink(sess_p);
}

int main(void) {
    const char *b = getenv("Q35_BIN");
    snprintf(bin, sizeof bin, "%s", b ? b : "build/q35");
    snprintf(out_p, sizeof out_p, "%s/reuse-cli.out", test_work_dir());
    snprintf(err_p, sizeof err_p, "%s/reuse-cli.err", test_work_dir());
    snprintf(in_p, sizeof in_p, "%s/reuse-cli.in", test_work_dir());
    snprintf(sess_p, sizeof sess_p, "%s/reuse-cli.q35s", test_work_dir());
    snprintf(talker, sizeof talker, "%s/models/talker", test_data_dir());
    snprintf(tiny, sizeof tiny, "%s/models/tiny-vl", test_data_dir());
    snprintf(narrow, sizeof narrow, "%s/models/narrow8", test_data_dir());
    RUN(test_chat_same_with_reuse);
    RUN(test_chat_session);
    RUN(test_generate_session);
    RUN(test_bad_session_files);
    TEST_EXIT();
}
