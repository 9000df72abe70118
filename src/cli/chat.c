/* q35 chat: an interactive multi-turn conversation. Each turn renders the whole conversation with
 * the chat template and resumes from the longest exact checkpoint of it (the session's own or one
 * in the prefix cache; q35.h), so only the tail is evaluated and the output is bit for bit that of
 * evaluating everything (--no-reuse). The template drops earlier thinking, so the text of past
 * turns can change: the cache then supplies an earlier checkpoint. --session FILE keeps the
 * conversation across runs. Works on a terminal and with piped stdin. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"

static volatile sig_atomic_t stop_answer;

static void on_sigint(int sig) {
    (void)sig;
    stop_answer = 1;
}

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 chat -m DIR [options]\n"
            "An interactive conversation; each input line is a user message. Commands:\n"
            "  /reset          forget the conversation\n"
            "  /system TEXT    set the system message (and reset)\n"
            "  /think on|off   thinking mode for the next answers\n"
            "  /image PATH     attach a JPEG or PNG to the next message (repeatable)\n"
            "  /quit           leave (so does end of input)\n"
            "Ctrl-C stops the current answer and keeps the program.\n\n"
            "  -m, --model DIR       checkpoint directory\n"
            "  -s, --system TEXT     a system message\n"
            "  -q, --quiet           no speed report on stderr\n");
    cli_gen_help(f);
}

static void add_message(cJSON *msgs, const char *role, const char *content) {
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(msgs, m);
}

/* A user message whose content is n_images image parts, then the text. */
static void add_user(cJSON *msgs, const char *text, int n_images) {
    if (n_images == 0) {
        add_message(msgs, "user", text);
        return;
    }
    cJSON *m = cJSON_CreateObject(), *parts = cJSON_CreateArray();
    cJSON_AddStringToObject(m, "role", "user");
    for (int i = 0; i < n_images; i++) {
        cJSON *p = cJSON_CreateObject();
        cJSON_AddStringToObject(p, "type", "image");
        cJSON_AddItemToArray(parts, p);
    }
    cJSON *t = cJSON_CreateObject();
    cJSON_AddStringToObject(t, "type", "text");
    cJSON_AddStringToObject(t, "text", text);
    cJSON_AddItemToArray(parts, t);
    cJSON_AddItemToObject(m, "content", parts);
    cJSON_AddItemToArray(msgs, m);
}

/* Forget the last n images of the conversation (attached to a message that was not kept). */
static void drop_images(cli_images *ci, int n) {
    for (; n > 0 && ci->n > 0; n--) free((void *)ci->im[--ci->n].embeds);
}

int cmd_chat(int argc, char **argv) {
    const char *dir = NULL;
    char *system = NULL;
    int quiet = 0;
    char side_buf[4096];
    cli_gen g;
    cli_gen_defaults_for_args(&g, argc, argv);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int r = cli_gen_option(&g, argc, argv, &i);
        if (r < 0) return 2;
        if (r > 0) continue;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help(stdout);
            return 0;
        } else if (i + 1 < argc && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            dir = argv[++i];
        } else if (i + 1 < argc && (!strcmp(a, "-s") || !strcmp(a, "--system"))) {
            free(system);
            system = strdup(argv[++i]);
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else {
            cli_error("chat: unknown or incomplete option '%s' (see q35 chat --help)", a);
            free(system);
            return 2;
        }
    }
    if (!dir) {
        cli_error("chat: need -m DIR (see q35 chat --help)");
        free(system);
        return 2;
    }
    const char *model_path = dir;
    dir = cli_side_dir(model_path, side_buf, sizeof side_buf); /* tokenizer, template, generation_config */
    const int tty = isatty(0);
    int rc = 1;
    q35_tokenizer *tok = NULL;
    q35_model *model = NULL;
    q35_session *s = NULL;
    cJSON *msgs = cJSON_CreateArray();
    q35_prefix_cache *cache = NULL;
    char *line = NULL;
    size_t line_cap = 0;
    cli_images images = {0}; /* every image of the conversation, in order; the last `pending` go with the next message */
    int pending = 0;
    q35_status st;
    if ((st = q35_tokenizer_load(dir, &tok))) { rc = cli_fail("", st); goto done; }
    if ((st = cli_load_model(model_path, &g.load, &model))) { rc = cli_fail("", st); goto done; }
    q35_model_info info;
    q35_model_get_info(model, &info);
    if (g.n_ctx > info.max_ctx) g.n_ctx = info.max_ctx;
    if ((st = q35_session_new_ex(model, &(q35_session_opts){g.n_ctx, g.kv_type}, &s))) { rc = cli_fail("", st); goto done; }
    cache = cli_prefix_cache(&g, model);
    if (g.session) {
        cJSON *conv = NULL;
        if ((rc = cli_session_load(s, g.session, &conv))) goto done;
        cJSON *loaded = cJSON_DetachItemFromObjectCaseSensitive(conv, "messages");
        if (conv && !cJSON_IsArray(loaded)) {
            cli_error("--session %s: not a chat conversation (made by q35 generate --raw or --prompt-ids?)", g.session);
            cJSON_Delete(loaded);
            cJSON_Delete(conv);
            rc = 1;
            goto done;
        }
        cJSON_Delete(conv);
        if (loaded) {
            cJSON_Delete(msgs);
            msgs = loaded;
            if (tty) fprintf(stderr, "(%d messages loaded from %s)\n", cJSON_GetArraySize(msgs), g.session);
        }
    }
    cli_stops stops;
    cli_stops_init(&stops, dir, tok);
    const int default_think = cli_template_default_thinking(dir);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    if (tty) fprintf(stderr, "q35 chat: type a message; /reset, /system TEXT, /think on|off, /image PATH, /quit. Ctrl-C stops an answer.\n");
    rc = 0;
    for (;;) {
        if (tty) {
            fputs("> ", stdout);
            fflush(stdout);
        }
        stop_answer = 0;
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0) {
            if (stop_answer && tty) { clearerr(stdin); putchar('\n'); continue; }
            break;
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = 0;
        if (len == 0) continue;
        if (!strcmp(line, "/quit") || !strcmp(line, "/exit")) break;
        if (!strcmp(line, "/reset")) {
            cJSON_Delete(msgs);
            msgs = cJSON_CreateArray();
            cli_images_clear(&images);
            pending = 0;
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (!strncmp(line, "/system", 7) && (line[7] == ' ' || line[7] == 0)) {
            free(system);
            system = line[7] ? strdup(line + 8) : NULL;
            cJSON_Delete(msgs);
            msgs = cJSON_CreateArray();
            cli_images_clear(&images);
            pending = 0;
            fprintf(stderr, "(system message %s; conversation reset)\n", system ? "set" : "cleared");
            continue;
        }
        if (!strncmp(line, "/think", 6)) {
            if (!strcmp(line, "/think on")) g.think = 1;
            else if (!strcmp(line, "/think off")) g.think = 0;
            else { fprintf(stderr, "(use /think on or /think off)\n"); continue; }
            fprintf(stderr, "(thinking %s)\n", g.think ? "on" : "off");
            continue;
        }
        if (!strncmp(line, "/image", 6) && (line[6] == ' ' || line[6] == 0)) {
            const char *path = line + 6;
            while (*path == ' ') path++;
            if (!*path) {
                fprintf(stderr, "(use /image PATH)\n");
            } else if (g.session) { /* the file keeps messages, not the pictures a later run would need */
                fprintf(stderr, "(images cannot be kept in --session files yet)\n");
            } else if (cli_images_add(&images, model, dir, &g, path) == 0) {
                pending++;
                fprintf(stderr, "(image %s attached to the next message: %d tokens)\n", path, images.im[images.n - 1].n_tokens);
            }
            continue;
        }
        if (line[0] == '/' && line[1] != '/' && strchr(line, ' ') == NULL && strlen(line) < 16) {
            fprintf(stderr, "(unknown command %s; commands: /reset /system /think /image /quit)\n", line);
            continue;
        }
        /* Render the conversation with the new user message. */
        cJSON *turn = cJSON_Duplicate(msgs, 1);
        if (system && cJSON_GetArraySize(turn) == 0) add_message(turn, "system", system);
        if (system && cJSON_GetArraySize(msgs) == 0) add_message(msgs, "system", system);
        add_user(turn, line, pending);
        char *json = cJSON_PrintUnformatted(turn);
        cJSON_Delete(turn);
        q35_chat_opts o = {1, g.think, 0, default_think};
        char *text = NULL;
        int32_t *ids = NULL, *gen = NULL;
        size_t n_ids = 0, n_gen = 0;
        st = json ? q35_chat_render(json, NULL, &o, &text) : Q35_ERR_NOMEM;
        free(json);
        if (!st) st = q35_tokenize(tok, text, strlen(text), 1, &ids, &n_ids);
        free(text);
        if (st || cli_images_expand(&images, model, &ids, &n_ids)) {
            if (st) cli_fail("chat", st);
            free(ids);
            drop_images(&images, pending);
            pending = 0;
            continue;
        }
        g.images = images.im, g.n_images = images.n; /* the prompt is the whole conversation: all its images */
        int r = cli_generate_reuse(s, cache, tok, &g, &stops, ids, n_ids, cli_stable_prefix(tok, ids, n_ids), stdout, &stop_answer, &gen, &n_gen, !quiet);
        putchar('\n');
        fflush(stdout);
        if (r) {
            drop_images(&images, pending);
            pending = 0;
            free(ids);
            free(gen);
            if (q35_session_ctx(s) <= (int)n_ids) {
                fprintf(stderr, "(the conversation no longer fits in the context; /reset to start over)\n");
            }
            continue;
        }
        if (stop_answer) fprintf(stderr, "(answer stopped)\n");
        /* Remember the answer (without its stop token) for the next turn. */
        size_t keep = n_gen;
        if (keep && cli_is_stop(&stops, gen[keep - 1])) keep--;
        char *answer = NULL;
        if (q35_detokenize(tok, gen, keep, &answer) == Q35_OK) {
            add_user(msgs, line, pending);
            add_message(msgs, "assistant", answer);
            if (g.session) {
                cJSON *conv = cJSON_CreateObject();
                cJSON_AddStringToObject(conv, "format", "q35-chat");
                cJSON_AddItemReferenceToObject(conv, "messages", msgs);
                if (cli_session_save(s, g.session, conv)) rc = 1;
                cJSON_Delete(conv);
            }
        } else {
            drop_images(&images, pending);
        }
        pending = 0;
        free(answer);
        free(ids);
        free(gen);
    }
done:
    cli_images_free(&images);
    free(line);
    q35_prefix_cache_free(cache);
    free(system);
    cJSON_Delete(msgs);
    q35_session_free(s);
    q35_model_free(model);
    q35_tokenizer_free(tok);
    return rc;
}
