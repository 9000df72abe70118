/* q35 generate: one prompt in, the streamed answer out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/common.h"
#include "cli/progress.h"

static void help(FILE *f) {
    fprintf(f,
            "usage: q35 generate -m DIR (-p TEXT | --prompt-ids IDS) [options]\n"
            "Streams the answer to stdout (chat template applied unless --raw); prompt and generation speed go to stderr.\n\n"
            "  -m, --model DIR       checkpoint directory (config.json, *.safetensors, tokenizer.json)\n"
            "  -p, --prompt TEXT     the user message (or the raw prompt with --raw)\n"
            "  -s, --system TEXT     a system message\n"
            "  --raw                 tokenize TEXT as it is, no chat template\n"
            "  --prompt-ids IDS      token ids (comma-separated) instead of -p\n"
            "  --image PATH          a JPEG or PNG the question is about (repeatable; placed before the\n"
            "                        text of the user message; with --raw or --prompt-ids the prompt holds\n"
            "                        one <|image_pad|> per image)\n"
            "  --print-ids           print generated token ids instead of text\n"
            "  --dump-logits FILE    write the float32 logits of every generated step ([steps][vocab])\n"
            "  -q, --quiet           no speed report on stderr\n");
    cli_gen_help(f);
}

/* Append {system} (to an empty conversation) and {user} to msgs and render them through the chat
 * template; n_images image parts come before the text. */
static int render_prompt(const char *dir, cJSON *msgs, const char *system, const char *user, int n_images, int think, char **out) {
    if (system && cJSON_GetArraySize(msgs) == 0) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "system");
        cJSON_AddStringToObject(m, "content", system);
        cJSON_AddItemToArray(msgs, m);
    }
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "role", "user");
    if (n_images > 0) {
        cJSON *parts = cJSON_AddArrayToObject(m, "content");
        for (int i = 0; i < n_images; i++) {
            cJSON *p = cJSON_CreateObject();
            cJSON_AddStringToObject(p, "type", "image");
            cJSON_AddItemToArray(parts, p);
        }
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", "text");
        cJSON_AddStringToObject(t, "text", user);
        cJSON_AddItemToArray(parts, t);
    } else {
        cJSON_AddStringToObject(m, "content", user);
    }
    cJSON_AddItemToArray(msgs, m);
    char *json = cJSON_PrintUnformatted(msgs);
    if (!json) return cli_fail("rendering the prompt", Q35_ERR_NOMEM);
    q35_chat_opts o = {1, think, 0, cli_template_default_thinking(dir)};
    q35_status st = q35_chat_render(json, NULL, &o, out);
    free(json);
    return st ? cli_fail("chat template", st) : 0;
}

int cmd_generate(int argc, char **argv) {
    const char *dir = NULL, *prompt = NULL, *system = NULL, *ids_arg = NULL, *dump = NULL;
    int raw = 0, quiet = 0;
    const char *image_paths[64];
    int n_image_paths = 0;
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
        } else if (!strcmp(a, "--raw")) {
            raw = 1;
        } else if (!strcmp(a, "--print-ids")) {
            g.print_ids = 1;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = 1;
        } else if (i + 1 < argc && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            dir = argv[++i];
        } else if (i + 1 < argc && (!strcmp(a, "-p") || !strcmp(a, "--prompt"))) {
            prompt = argv[++i];
        } else if (i + 1 < argc && (!strcmp(a, "-s") || !strcmp(a, "--system"))) {
            system = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--prompt-ids")) {
            ids_arg = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--image")) {
            if (n_image_paths == 64) {
                cli_error("generate: at most 64 --image");
                return 2;
            }
            image_paths[n_image_paths++] = argv[++i];
        } else if (i + 1 < argc && !strcmp(a, "--dump-logits")) {
            dump = argv[++i];
        } else {
            cli_error("generate: unknown or incomplete option '%s' (see q35 generate --help)", a);
            return 2;
        }
    }
    if (!dir || (!prompt == !ids_arg)) {
        cli_error("generate: need -m DIR and exactly one of -p TEXT or --prompt-ids IDS (see q35 generate --help)");
        return 2;
    }
    const char *model_path = dir;
    dir = cli_side_dir(model_path, side_buf, sizeof side_buf); /* tokenizer, template, generation_config */
    int rc = 1;
    q35_tokenizer *tok = NULL;
    q35_model *model = NULL;
    q35_session *s = NULL;
    q35_prefix_cache *cache = NULL;
    cJSON *conv = NULL;
    int32_t *ids = NULL, *gen = NULL;
    size_t n_ids = 0, n_gen = 0;
    char *text = NULL;
    cli_images images = {0};
    q35_status st;
    const int templated = prompt && !raw;
    if (g.session && n_image_paths) { /* the file keeps messages, not the pictures a later turn would need */
        cli_error("generate: --session cannot be used with --image yet");
        return 2;
    }
    if (prompt || !g.print_ids || (g.session && templated)) {
        if ((st = q35_tokenizer_load(dir, &tok))) { rc = cli_fail("", st); goto done; }
    }
    if ((st = cli_load_model(model_path, &g.load, &model))) { rc = cli_fail("", st); goto done; }
    q35_model_info info;
    q35_model_get_info(model, &info);
    if (g.n_ctx > info.max_ctx) {
        cli_error("--ctx %d is more than the model's maximum of %d tokens", g.n_ctx, info.max_ctx);
        goto done;
    }
    for (int i = 0; i < n_image_paths; i++)
        if (cli_images_add(&images, model, dir, &g, image_paths[i])) goto done;
    if ((st = q35_session_new_ex(model, &(q35_session_opts){g.n_ctx, g.kv_type}, &s))) { rc = cli_fail("", st); goto done; }
    /* --session: the conversation so far (messages, or every token in raw mode). */
    if (g.session && cli_session_load(s, g.session, &conv)) goto done;
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(conv, "format");
    if (conv && strcmp(fmt->valuestring, templated ? "q35-chat" : "q35-raw") != 0) {
        cli_error("--session %s: holds a %s conversation; this run is %s", g.session, fmt->valuestring,
                  templated ? "a chat-template prompt (-p without --raw)" : "raw (--raw or --prompt-ids)");
        goto done;
    }
    if (!conv) {
        conv = cJSON_CreateObject();
        cJSON_AddStringToObject(conv, "format", templated ? "q35-chat" : "q35-raw");
        cJSON_AddItemToObject(conv, templated ? "messages" : "tokens", cJSON_CreateArray());
    }
    cJSON *msgs = cJSON_GetObjectItemCaseSensitive(conv, "messages"), *prior = cJSON_GetObjectItemCaseSensitive(conv, "tokens");
    if (templated ? !cJSON_IsArray(msgs) : !cJSON_IsArray(prior)) {
        cli_error("--session %s: the conversation has no %s array", g.session, templated ? "messages" : "tokens");
        goto done;
    }
    if (ids_arg) {
        if (cli_parse_ids(ids_arg, &ids, &n_ids)) { rc = 2; goto done; }
    } else {
        if (raw) {
            text = strdup(prompt);
        } else if (render_prompt(dir, msgs, system, prompt, n_image_paths, g.think, &text)) {
            goto done;
        }
        if ((st = q35_tokenize(tok, text, strlen(text), 1, &ids, &n_ids))) { rc = cli_fail("tokenizing the prompt", st); goto done; }
    }
    if (n_ids == 0) {
        cli_error("generate: the prompt is empty");
        goto done;
    }
    if (!templated && cJSON_GetArraySize(prior) > 0) { /* raw continuation: every earlier token, then these */
        const size_t n_prior = (size_t)cJSON_GetArraySize(prior);
        int32_t *all = malloc(sizeof(int32_t) * (n_prior + n_ids));
        if (!all) { cli_error("out of memory"); goto done; }
        size_t k = 0;
        for (const cJSON *e = prior->child; e; e = e->next) {
            if (!cJSON_IsNumber(e) || e->valuedouble < 0 || e->valuedouble >= info.n_vocab) {
                cli_error("--session %s: tokens[%zu] is not a token id of this model", g.session, k);
                free(all);
                goto done;
            }
            all[k++] = (int32_t)e->valuedouble;
        }
        memcpy(all + k, ids, sizeof(int32_t) * n_ids);
        free(ids);
        ids = all;
        n_ids += n_prior;
    }
    if (cli_images_expand(&images, model, &ids, &n_ids)) goto done;
    g.images = images.im, g.n_images = images.n;
    if (dump && !(g.dump_logits = fopen(dump, "wb"))) {
        cli_error("--dump-logits: cannot create %s", dump);
        goto done;
    }
    cache = cli_prefix_cache(&g, model);
    cli_stops stops;
    cli_stops_init(&stops, dir, tok);
    rc = cli_generate_reuse(s, cache, tok, &g, &stops, ids, n_ids, templated ? cli_stable_prefix(tok, ids, n_ids) : n_ids, stdout, NULL, g.session ? &gen : NULL, g.session ? &n_gen : NULL, !quiet);
    if (!g.print_ids) putchar('\n');
    if (!rc && g.session) {
        if (templated) {
            size_t keep = n_gen;
            if (keep && cli_is_stop(&stops, gen[keep - 1])) keep--;
            char *answer = NULL;
            if ((st = q35_detokenize(tok, gen, keep, &answer))) { rc = cli_fail("--session", st); goto done; }
            cJSON *m = cJSON_CreateObject();
            cJSON_AddStringToObject(m, "role", "assistant");
            cJSON_AddStringToObject(m, "content", answer);
            cJSON_AddItemToArray(msgs, m);
            free(answer);
        } else {
            cJSON *arr = cJSON_CreateArray();
            for (size_t i = 0; i < n_ids; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            for (size_t i = 0; i < n_gen; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(gen[i]));
            cJSON_ReplaceItemInObjectCaseSensitive(conv, "tokens", arr);
        }
        rc = cli_session_save(s, g.session, conv);
    }
done:
    if (g.dump_logits && fclose(g.dump_logits) != 0 && rc == 0) {
        cli_error("--dump-logits: write failed");
        rc = 1;
    }
    free(text);
    free(ids);
    cli_images_free(&images);
    free(gen);
    cJSON_Delete(conv);
    q35_prefix_cache_free(cache);
    q35_session_free(s);
    q35_model_free(model);
    q35_tokenizer_free(tok);
    return rc;
}
