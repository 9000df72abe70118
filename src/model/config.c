#include "model/config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/file.h"
#include "formats/json.h"

#define BIG 1000000000L

static q35_status read_int(const cJSON *o, const char *f, const char *what, long lo, long hi, int *out) {
    long v;
    q35_status st = q35_json_int(o, f, what, lo, hi, &v);
    if (!st) *out = (int)v;
    return st;
}
static q35_status read_int_opt(const cJSON *o, const char *f, const char *what, long lo, long hi, int *out) {
    long v = *out;
    q35_status st = q35_json_int_opt(o, f, what, lo, hi, &v);
    if (!st) *out = (int)v;
    return st;
}

/* eos_token_id: absent or null, one id, or an array of ids (the first Q35_MAX_EOS kept); every id an
 * integer in [0, 2^30], checked before the cast. */
static q35_status read_eos(const cJSON *eos, const char *what, q35_config *c) {
    const cJSON *v;
    if (cJSON_IsNumber(eos)) {
        if (!q35_json_is_int_in(eos, 0, 1 << 30)) return q35_fail(Q35_ERR_FORMAT, "%s: eos_token_id must be an integer in [0, 2^30]", what);
        c->eos_ids[c->n_eos++] = (int)eos->valuedouble;
    } else if (cJSON_IsArray(eos)) {
        cJSON_ArrayForEach(v, eos) {
            if (!q35_json_is_int_in(v, 0, 1 << 30)) return q35_fail(Q35_ERR_FORMAT, "%s: eos_token_id must hold integers in [0, 2^30]", what);
            if (c->n_eos < Q35_MAX_EOS) c->eos_ids[c->n_eos++] = (int)v->valuedouble;
        }
    }
    return Q35_OK;
}

static q35_status parse_text_config(const cJSON *tc, const char *what, q35_config *c) {
    q35_status st;
    const char *s = NULL;
    if ((st = q35_json_str_opt(tc, "model_type", what, &s))) return st;
    if (s && strcmp(s, "qwen3_5_text") != 0 && strcmp(s, "qwen3_5") != 0)
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (expected qwen3_5_text)", what, s);
    if ((st = q35_json_str_opt(tc, "hidden_act", what, &s))) return st;
    if (s && strcmp(s, "silu") != 0) return q35_fail(Q35_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (expected silu)", what, s);
    const cJSON *mlp_only = cJSON_GetObjectItemCaseSensitive(tc, "mlp_only_layers");
    if (mlp_only && !(cJSON_IsArray(mlp_only) && cJSON_GetArraySize(mlp_only) == 0))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: 'mlp_only_layers' must be empty (mixture-of-experts models are not supported)", what);
    if (cJSON_GetObjectItemCaseSensitive(tc, "num_experts"))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: mixture-of-experts models (num_experts) are not supported", what);
    int bias = 0;
    if ((st = q35_json_bool_opt(tc, "attention_bias", what, &bias))) return st;
    if (bias) return q35_fail(Q35_ERR_UNSUPPORTED, "%s: attention_bias = true is not supported", what);

    if ((st = read_int(tc, "hidden_size", what, 1, 1 << 16, &c->hidden))) return st;
    if ((st = read_int(tc, "num_hidden_layers", what, 1, Q35_MAX_LAYERS, &c->n_layers))) return st;
    if ((st = read_int(tc, "intermediate_size", what, 1, 1 << 20, &c->intermediate))) return st;
    if ((st = read_int(tc, "vocab_size", what, 1, 1 << 24, &c->vocab))) return st;
    if ((st = read_int(tc, "num_attention_heads", what, 1, 1024, &c->n_heads))) return st;
    if ((st = read_int(tc, "num_key_value_heads", what, 1, 1024, &c->n_kv_heads))) return st;
    c->head_dim = c->hidden / c->n_heads;
    if ((st = read_int_opt(tc, "head_dim", what, 1, 4096, &c->head_dim))) return st;
    if (c->n_heads % c->n_kv_heads)
        return q35_fail(Q35_ERR_FORMAT, "%s: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", what,
                        c->n_heads, c->n_kv_heads);
    if ((st = read_int(tc, "linear_num_key_heads", what, 1, 1024, &c->lin_k_heads))) return st;
    if ((st = read_int(tc, "linear_num_value_heads", what, 1, 1024, &c->lin_v_heads))) return st;
    if ((st = read_int(tc, "linear_key_head_dim", what, 1, 4096, &c->lin_k_dim))) return st;
    if ((st = read_int(tc, "linear_value_head_dim", what, 1, 4096, &c->lin_v_dim))) return st;
    if (c->lin_v_heads % c->lin_k_heads)
        return q35_fail(Q35_ERR_FORMAT, "%s: linear_num_value_heads (%d) must be a multiple of linear_num_key_heads (%d)", what,
                        c->lin_v_heads, c->lin_k_heads);
    c->conv_kernel = 4;
    if ((st = read_int_opt(tc, "linear_conv_kernel_dim", what, 1, 64, &c->conv_kernel))) return st;
    double eps = 1e-6;
    if ((st = q35_json_num_opt(tc, "rms_norm_eps", what, &eps))) return st;
    if (!(eps > 0 && eps < 1)) return q35_fail(Q35_ERR_FORMAT, "%s: rms_norm_eps must be in (0, 1)", what);
    c->rms_eps = (float)eps;
    c->max_pos = 262144;
    if ((st = read_int_opt(tc, "max_position_embeddings", what, 1, 1L << 30, &c->max_pos))) return st;
    c->attn_output_gate = 1;
    if ((st = q35_json_bool_opt(tc, "attn_output_gate", what, &c->attn_output_gate))) return st;
    /* tie_word_embeddings: text_config's value when given (the wrapper's top-level value is read by the caller). */
    if ((st = q35_json_bool_opt(tc, "tie_word_embeddings", what, &c->tie_embeddings))) return st;

    /* RoPE: rope_parameters (current transformers) or rope_scaling + rope_theta (older files). */
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_parameters");
    if (!rp || cJSON_IsNull(rp)) rp = cJSON_GetObjectItemCaseSensitive(tc, "rope_scaling");
    if (rp && !cJSON_IsNull(rp) && !cJSON_IsObject(rp)) return q35_fail(Q35_ERR_FORMAT, "%s: rope_parameters must be an object", what);
    char rwhat[160];
    snprintf(rwhat, sizeof rwhat, "%s: rope_parameters", what);
    c->rope_theta = 10000000.0;
    double partial = 0.25;
    if ((st = q35_json_num_opt(tc, "rope_theta", what, &c->rope_theta))) return st;
    if ((st = q35_json_num_opt(tc, "partial_rotary_factor", what, &partial))) return st;
    c->mrope_section[0] = 11, c->mrope_section[1] = 11, c->mrope_section[2] = 10;
    c->mrope_interleaved = 1;
    if (rp && cJSON_IsObject(rp)) {
        if ((st = q35_json_num_opt(rp, "rope_theta", rwhat, &c->rope_theta))) return st;
        if ((st = q35_json_num_opt(rp, "partial_rotary_factor", rwhat, &partial))) return st;
        const char *rt = NULL;
        if ((st = q35_json_str_opt(rp, "rope_type", rwhat, &rt))) return st;
        if (!rt && (st = q35_json_str_opt(rp, "type", rwhat, &rt))) return st;
        if (rt && strcmp(rt, "default") != 0 && strcmp(rt, "mrope") != 0)
            return q35_fail(Q35_ERR_UNSUPPORTED, "%s: rope_type '%s' is not supported (expected default)", rwhat, rt);
        if ((st = q35_json_bool_opt(rp, "mrope_interleaved", rwhat, &c->mrope_interleaved))) return st;
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(rp, "mrope_section");
        if (ms && !cJSON_IsNull(ms)) {
            if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) != 3)
                return q35_fail(Q35_ERR_FORMAT, "%s: mrope_section must be an array of 3 integers", rwhat);
            for (int i = 0; i < 3; i++) {
                const cJSON *v = cJSON_GetArrayItem(ms, i);
                if (!q35_json_is_int_in(v, 0, 4096))
                    return q35_fail(Q35_ERR_FORMAT, "%s: mrope_section[%d] must be a non-negative integer", rwhat, i);
                c->mrope_section[i] = (int)v->valuedouble;
            }
        }
    }
    if (!(c->rope_theta > 0)) return q35_fail(Q35_ERR_FORMAT, "%s: rope_theta must be positive", what);
    if (!(partial > 0 && partial <= 1)) return q35_fail(Q35_ERR_FORMAT, "%s: partial_rotary_factor must be in (0, 1]", what);
    c->rope_dim = (int)(c->head_dim * partial);
    c->rope_dim -= c->rope_dim % 2;
    if (c->rope_dim < 2) return q35_fail(Q35_ERR_FORMAT, "%s: head_dim * partial_rotary_factor gives no rotary dims", what);
    if (c->mrope_section[0] + c->mrope_section[1] + c->mrope_section[2] != c->rope_dim / 2)
        return q35_fail(Q35_ERR_FORMAT, "%s: mrope_section [%d, %d, %d] must sum to rotary dims / 2 = %d", rwhat, c->mrope_section[0],
                        c->mrope_section[1], c->mrope_section[2], c->rope_dim / 2);

    /* layer_types, or the full_attention_interval rule. */
    int interval = 4;
    if ((st = read_int_opt(tc, "full_attention_interval", what, 1, Q35_MAX_LAYERS, &interval))) return st;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(tc, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
            return q35_fail(Q35_ERR_FORMAT, "%s: layer_types must be an array of num_hidden_layers (%d) strings", what, c->n_layers);
        for (int i = 0; i < c->n_layers; i++) {
            const cJSON *v = cJSON_GetArrayItem(lt, i);
            if (cJSON_IsString(v) && strcmp(v->valuestring, "full_attention") == 0) c->layer_full[i] = 1;
            else if (cJSON_IsString(v) && strcmp(v->valuestring, "linear_attention") == 0) c->layer_full[i] = 0;
            else return q35_fail(Q35_ERR_FORMAT, "%s: layer_types[%d] must be \"linear_attention\" or \"full_attention\"", what, i);
        }
    } else {
        for (int i = 0; i < c->n_layers; i++) c->layer_full[i] = ((i + 1) % interval) == 0;
    }
    c->n_full = c->n_linear = 0;
    for (int i = 0; i < c->n_layers; i++) c->layer_full[i] ? c->n_full++ : c->n_linear++;

    return read_eos(cJSON_GetObjectItemCaseSensitive(tc, "eos_token_id"), what, c);
}

/* vision_config (spec §1.1, §5.2). Checked against transformers 5.23 configuration_qwen3_5.py:
 * Qwen3_5VisionConfig defaults are depth 27, hidden 1152, ... (the Qwen3-VL ones), so every size
 * the tower needs is required here rather than defaulted; the real checkpoints write them all. */
static q35_status parse_vision_config(const cJSON *vc, const char *what, q35_vision_config *v) {
    q35_status st;
    if ((st = read_int(vc, "depth", what, 1, 1024, &v->depth))) return st;
    if ((st = read_int(vc, "hidden_size", what, 1, 1 << 16, &v->hidden))) return st;
    if ((st = read_int(vc, "num_heads", what, 1, 1024, &v->n_heads))) return st;
    if ((st = read_int(vc, "intermediate_size", what, 1, 1 << 20, &v->intermediate))) return st;
    if ((st = read_int(vc, "out_hidden_size", what, 1, 1 << 16, &v->out_hidden))) return st;
    if ((st = read_int(vc, "num_position_embeddings", what, 1, 1 << 24, &v->n_pos))) return st;
    v->in_channels = 3, v->patch = 16, v->temporal_patch = 2, v->merge = 2;
    if ((st = read_int_opt(vc, "in_channels", what, 1, 16, &v->in_channels))) return st;
    if ((st = read_int_opt(vc, "patch_size", what, 1, 1024, &v->patch))) return st;
    if ((st = read_int_opt(vc, "temporal_patch_size", what, 1, 64, &v->temporal_patch))) return st;
    if ((st = read_int_opt(vc, "spatial_merge_size", what, 1, 64, &v->merge))) return st;
    if (v->hidden % v->n_heads || (v->hidden / v->n_heads) % 4)
        return q35_fail(Q35_ERR_FORMAT, "%s: hidden_size (%d) / num_heads (%d) must be a whole multiple of 4 (the 2-D rotary splits it)", what,
                        v->hidden, v->n_heads);
    v->pos_side = (int)lround(sqrt((double)v->n_pos));
    if (v->pos_side * v->pos_side != v->n_pos)
        return q35_fail(Q35_ERR_FORMAT, "%s: num_position_embeddings (%d) must be a square (the learned table is side x side)", what, v->n_pos);
    const char *act = NULL;
    if ((st = q35_json_str_opt(vc, "hidden_act", what, &act))) return st;
    v->act_exact = 0;
    if (act && strcmp(act, "gelu_pytorch_tanh") != 0) {
        if (strcmp(act, "gelu") != 0)
            return q35_fail(Q35_ERR_UNSUPPORTED, "%s: hidden_act '%s' is not supported (expected gelu_pytorch_tanh)", what, act);
        v->act_exact = 1;
    }
    const cJSON *ds = cJSON_GetObjectItemCaseSensitive(vc, "deepstack_visual_indexes");
    if (ds && !(cJSON_IsArray(ds) && cJSON_GetArraySize(ds) == 0))
        return q35_fail(Q35_ERR_UNSUPPORTED, "%s: deepstack_visual_indexes must be empty (Qwen3.5 has no deepstack features)", what);
    v->rope_theta = 10000.0;
    const cJSON *rp = cJSON_GetObjectItemCaseSensitive(vc, "rope_parameters");
    if (rp && cJSON_IsObject(rp)) {
        char rwhat[700];
        snprintf(rwhat, sizeof rwhat, "%s: rope_parameters", what);
        if ((st = q35_json_num_opt(rp, "rope_theta", rwhat, &v->rope_theta))) return st;
        const char *rt = NULL;
        if ((st = q35_json_str_opt(rp, "rope_type", rwhat, &rt))) return st;
        if (rt && strcmp(rt, "axial") != 0 && strcmp(rt, "default") != 0)
            return q35_fail(Q35_ERR_UNSUPPORTED, "%s: rope_type '%s' is not supported (expected axial)", rwhat, rt);
    }
    if (!(v->rope_theta > 0)) return q35_fail(Q35_ERR_FORMAT, "%s: rope_theta must be positive", what);
    return Q35_OK;
}

q35_status q35_config_parse(const char *text, size_t len, const char *what, q35_config *c) {
    memset(c, 0, sizeof *c);
    c->image_token_id = c->vision_start_token_id = c->vision_end_token_id = -1;
    cJSON *root;
    q35_status st = q35_json_parse(text, len, what, &root);
    if (st) return st;
    if (!cJSON_IsObject(root)) {
        st = q35_fail(Q35_ERR_FORMAT, "%s: must be a JSON object", what);
        goto done;
    }
    const cJSON *archs = cJSON_GetObjectItemCaseSensitive(root, "architectures");
    if (archs && cJSON_IsArray(archs) && cJSON_GetArraySize(archs) > 0 && cJSON_IsString(cJSON_GetArrayItem(archs, 0)))
        snprintf(c->arch, sizeof c->arch, "%s", cJSON_GetArrayItem(archs, 0)->valuestring);
    const char *mt = NULL;
    if ((st = q35_json_str_opt(root, "model_type", what, &mt))) goto done;
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "text_config");
    if (c->arch[0] && strcmp(c->arch, "Qwen3_5ForConditionalGeneration") != 0 && strcmp(c->arch, "Qwen3_5ForCausalLM") != 0 &&
        strcmp(c->arch, "Qwen3_5TextModel") != 0) {
        st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (expected Qwen3_5ForConditionalGeneration or Qwen3_5ForCausalLM)",
                      what, c->arch);
        goto done;
    }
    if (!c->arch[0] && (!mt || (strcmp(mt, "qwen3_5") != 0 && strcmp(mt, "qwen3_5_text") != 0))) {
        st = q35_fail(Q35_ERR_UNSUPPORTED, "%s: neither 'architectures' nor model_type names a Qwen3.5 model", what);
        goto done;
    }
    c->tie_embeddings = 0;
    int top_tie = -1;
    if ((st = q35_json_bool_opt(root, "tie_word_embeddings", what, &top_tie))) goto done;
    if (tc && !cJSON_IsNull(tc)) {
        if (!cJSON_IsObject(tc)) {
            st = q35_fail(Q35_ERR_FORMAT, "%s: text_config must be an object", what);
            goto done;
        }
        char twhat[600];
        snprintf(twhat, sizeof twhat, "%s: text_config", what);
        c->is_wrapper = 1;
        c->tie_embeddings = top_tie == 1;
        st = parse_text_config(tc, twhat, c);
        if (!st && top_tie >= 0 && !cJSON_GetObjectItemCaseSensitive(tc, "tie_word_embeddings")) c->tie_embeddings = top_tie;
        const cJSON *vc = cJSON_GetObjectItemCaseSensitive(root, "vision_config");
        c->has_vision_config = vc && cJSON_IsObject(vc);
        if (!st && c->has_vision_config) {
            char vwhat[600];
            snprintf(vwhat, sizeof vwhat, "%s: vision_config", what);
            st = parse_vision_config(vc, vwhat, &c->vision);
            if (!st && c->vision.out_hidden != c->hidden)
                st = q35_fail(Q35_ERR_FORMAT, "%s: out_hidden_size (%d) must equal text_config.hidden_size (%d)", vwhat, c->vision.out_hidden,
                              c->hidden);
            /* Defaults of transformers' Qwen3_5Config (the ids of the real tokenizer). */
            c->image_token_id = 248056, c->vision_start_token_id = 248053, c->vision_end_token_id = 248054;
            if (!st) st = read_int_opt(root, "image_token_id", what, 0, 1 << 30, &c->image_token_id);
            if (!st) st = read_int_opt(root, "vision_start_token_id", what, 0, 1 << 30, &c->vision_start_token_id);
            if (!st) st = read_int_opt(root, "vision_end_token_id", what, 0, 1 << 30, &c->vision_end_token_id);
        }
        if (!st && c->n_eos == 0) st = read_eos(cJSON_GetObjectItemCaseSensitive(root, "eos_token_id"), what, c);
    } else {
        c->tie_embeddings = top_tie == 1;
        st = parse_text_config(root, what, c);
    }
done:
    cJSON_Delete(root);
    return st;
}

q35_status q35_config_load(const char *dir, q35_config *cfg) {
    char path[4096];
    q35_status st = q35_path_join(path, sizeof path, dir, "config.json");
    if (st) return st;
    char *text;
    size_t len;
    if ((st = q35_read_file(path, 16u << 20, &text, &len))) return st;
    st = q35_config_parse(text, len, path, cfg);
    free(text);
    return st;
}
