/* q35 tokenize / q35 detokenize: text to token ids and back with a checkpoint's tokenizer.json. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "core/file.h"
#include "text/tokenizer.h"
#include "text/utf8.h"

#define MAX_INPUT_BYTES ((size_t)1 << 30) /* --file / stdin inputs above 1 GiB are refused */

static void tokenize_help(FILE *f) {
    fprintf(f,
            "usage: q35 tokenize -m DIR [--json] [--no-special] (TEXT | --file PATH)\n"
            "\n"
            "Prints the token ids of TEXT (UTF-8) as Hugging Face tokenizers would, space-separated, with no\n"
            "BOS/EOS added. Invalid UTF-8 is read as U+FFFD (one per maximal invalid sequence).\n"
            "\n"
            "  -m, --model DIR   a directory with tokenizer.json (tokenizer_config.json optional; weights are\n"
            "                    not needed), or the path of a tokenizer.json\n"
            "  --file PATH       read the text from a file ('-': stdin), byte for byte\n"
            "  --json            print a JSON array of {\"id\": N, \"token\": S, \"piece\": P}: S is the token\n"
            "                    as tokenizer.json writes it, P the text it stands for (a partial UTF-8\n"
            "                    sequence shows as U+FFFD)\n"
            "  --no-special      special added tokens (<|im_start|>, <|endoftext|>, ...) in the text are\n"
            "                    plain text; non-special added tokens (<think>, <tool_call>, ...) still match\n"
            "  -h, --help        this help\n");
}

static void detokenize_help(FILE *f) {
    fprintf(f,
            "usage: q35 detokenize -m DIR IDS...\n"
            "\n"
            "Prints the text of token ids exactly (no newline added; invalid UTF-8 becomes U+FFFD).\n"
            "IDS are separate arguments and/or lists separated by commas or spaces; '-' reads ids from stdin.\n"
            "\n"
            "  -m, --model DIR   a directory with tokenizer.json, or the path of a tokenizer.json\n"
            "  -h, --help        this help\n");
}

static q35_status load_tokenizer(const char *path, q35_tokenizer **tok) {
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return q35_tokenizer_load_file(path, tok);
    return q35_tokenizer_load(path, tok);
}

/* Read a file ('-': stdin) whole; returns 0 or prints the error and returns 1. */
static int read_all(const char *path, char **data, size_t *len) {
    *data = NULL;
    *len = 0;
    if (strcmp(path, "-") != 0) {
        q35_status st = q35_read_file(path, MAX_INPUT_BYTES, data, len);
        return st ? cli_fail("", st) : 0;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            cli_error("stdin: out of memory");
            return 1;
        }
        size_t r = fread(b + n, 1, cap - n - 1, stdin);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            if (cap > MAX_INPUT_BYTES) {
                free(b);
                cli_error("stdin: more than %zu bytes", MAX_INPUT_BYTES);
                return 1;
            }
            char *nb = realloc(b, cap * 2);
            if (!nb) free(b);
            b = nb;
            cap *= 2;
        }
    }
    if (ferror(stdin)) {
        free(b);
        cli_error("stdin: read error");
        return 1;
    }
    b[n] = 0;
    *data = b;
    *len = n;
    return 0;
}

/* s[0..n) as the contents of a JSON string. */
static void json_string(FILE *f, const char *s, size_t n) {
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *file = NULL, *text = NULL;
    int json = 0, special = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            tokenize_help(stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--file")) {
            if (i + 1 >= argc) {
                cli_error("tokenize: %s needs a value", a);
                return 2;
            }
            if (!strcmp(a, "--file")) file = argv[++i];
            else model = argv[++i];
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--no-special")) {
            special = 0;
        } else if (!strcmp(a, "--")) {
            if (i + 1 < argc) text = argv[++i];
            if (i + 1 < argc) {
                cli_error("tokenize: more than one TEXT (quote the text)");
                return 2;
            }
        } else if (a[0] == '-' && a[1] && !text) {
            cli_error("tokenize: unknown option '%s' (try q35 tokenize --help)", a);
            return 2;
        } else if (text) {
            cli_error("tokenize: more than one TEXT (quote the text)");
            return 2;
        } else {
            text = a;
        }
    }
    if (!model || (!text && !file) || (text && file)) {
        cli_error("tokenize: needs -m DIR and either TEXT or --file PATH (try q35 tokenize --help)");
        return 2;
    }
    char *data = NULL;
    size_t len = 0;
    if (file) {
        if (read_all(file, &data, &len)) return 1;
    }
    q35_tokenizer *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    q35_status st = load_tokenizer(model, &tok);
    int rc = 0;
    if (st) rc = cli_fail("", st);
    else if ((st = q35_tokenize(tok, data ? data : text, data ? len : strlen(text), special, &ids, &n)))
        rc = cli_fail("tokenize", st);
    if (!rc && json) {
        fputc('[', stdout);
        for (size_t i = 0; i < n; i++) {
            const char *token = q35_tokenizer_token_text(tok, ids[i]);
            size_t blen = 0;
            const unsigned char *b = (const unsigned char *)q35_token_bytes(tok, ids[i], &blen);
            unsigned char piece[1024];
            size_t plen = b && q35_utf8_sanitized_len(b, blen) <= sizeof piece ? q35_utf8_sanitize(b, blen, piece) : 0;
            fprintf(stdout, "%s{\"id\":%d,\"token\":", i ? "," : "", (int)ids[i]);
            json_string(stdout, token ? token : "", token ? strlen(token) : 0);
            fputs(",\"piece\":", stdout);
            json_string(stdout, (const char *)piece, plen);
            fputc('}', stdout);
        }
        fputs("]\n", stdout);
    } else if (!rc) {
        for (size_t i = 0; i < n; i++) fprintf(stdout, i ? " %d" : "%d", (int)ids[i]);
        fputc('\n', stdout);
    }
    if (!rc && fflush(stdout)) {
        cli_error("tokenize: write error");
        rc = 1;
    }
    free(ids);
    free(data);
    q35_tokenizer_free(tok);
    return rc;
}

/* Append the ids in s (separated by commas or whitespace) to *ids. Returns 0, or 2 after an error. */
static int parse_ids(const char *s, int32_t **ids, size_t *n, size_t *cap) {
    const char *p = s;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) return 0;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < 0 || x > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            cli_error("detokenize: bad token id in '%.60s': expected non-negative integers separated by commas or "
                      "spaces", s);
            return 2;
        }
        if (*n == *cap) {
            size_t nc = *cap ? 2 * *cap : 64;
            int32_t *v = realloc(*ids, nc * sizeof *v);
            if (!v) {
                cli_error("detokenize: out of memory");
                return 1;
            }
            *ids = v;
            *cap = nc;
        }
        (*ids)[(*n)++] = (int32_t)x;
        p = end;
    }
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL;
    int32_t *ids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0, any = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            detokenize_help(stdout);
            free(ids);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (i + 1 >= argc) {
                cli_error("detokenize: %s needs a value", a);
                rc = 2;
            } else {
                model = argv[++i];
            }
        } else if (!strcmp(a, "-")) {
            char *data;
            size_t len;
            any = 1;
            if (read_all("-", &data, &len)) {
                rc = 1;
            } else {
                if (strlen(data) != len) {
                    cli_error("detokenize: stdin contains a NUL byte");
                    rc = 2;
                } else {
                    rc = parse_ids(data, &ids, &n, &cap);
                }
                free(data);
            }
        } else if (a[0] == '-' && a[1] && (a[1] < '0' || a[1] > '9')) {
            cli_error("detokenize: unknown option '%s' (try q35 detokenize --help)", a);
            rc = 2;
        } else {
            any = 1;
            rc = parse_ids(a, &ids, &n, &cap);
        }
    }
    if (!rc && (!model || !any)) {
        cli_error("detokenize: needs -m DIR and token ids (try q35 detokenize --help)");
        rc = 2;
    }
    q35_tokenizer *tok = NULL;
    q35_stream_decoder *dec = NULL;
    q35_status st;
    if (!rc && (st = load_tokenizer(model, &tok))) rc = cli_fail("", st);
    for (size_t i = 0; !rc && i < n; i++) {
        if (!q35_token_bytes(tok, ids[i], NULL)) {
            cli_error("detokenize: %d is not a token id of this tokenizer (vocabulary size %d)", (int)ids[i],
                      q35_tokenizer_vocab_size(tok));
            rc = 1;
        }
    }
    /* the stream decoder gives lengths, so text with U+0000 in it comes out whole */
    if (!rc && !(dec = q35_stream_decoder_new(tok))) {
        cli_error("detokenize: out of memory");
        rc = 1;
    }
    if (!rc) {
        char out[4096];
        size_t w;
        for (size_t i = 0; i < n; i++) {
            w = q35_stream_decoder_push(dec, ids[i], out, sizeof out);
            fwrite(out, 1, w, stdout);
        }
        while ((w = q35_stream_decoder_flush(dec, out, sizeof out)) > 0) fwrite(out, 1, w, stdout);
        if (fflush(stdout) || ferror(stdout)) {
            cli_error("detokenize: write error");
            rc = 1;
        }
    }
    q35_stream_decoder_free(dec);
    free(ids);
    q35_tokenizer_free(tok);
    return rc;
}
