/* transformer_window.c: which blocks of a Hugging Face config or plumb-transformer/1
 * description have a sliding window and how wide (transformer.window, full_layers): each
 * family's rule from transformers' configurations (core/transformer_read.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "transformer_read.h"

/* The per-layer attention kinds at root.layer_types (transformers' list: one string a
 * layer, "sliding_attention" or "full_attention") into full[] (1: full), *given set to 1;
 * absent or null: *given 0 and full[] unchanged. */
int tf_get_layer_types(const jctx *jc, const cJSON *root, long long layers,
                       unsigned char *full, int *given)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    *given = 0;
    if (!a || cJSON_IsNull(a)) return 0;
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != layers)
        return err_set(jc->err, jc->file, "layer_types",
                       "expected an array of %lld strings, one a layer, \"sliding_attention\" "
                       "or \"full_attention\" (got %s of %d)", layers,
                       cJSON_IsArray(a) ? "an array" : "no array",
                       cJSON_IsArray(a) ? cJSON_GetArraySize(a) : 0);
    long long l = 0;
    for (const cJSON *v = a->child; v; v = v->next, l++) {
        int sliding = cJSON_IsString(v) && strcmp(v->valuestring, "sliding_attention") == 0;
        if (!sliding && !(cJSON_IsString(v) && strcmp(v->valuestring, "full_attention") == 0)) {
            char key[48];
            snprintf(key, sizeof key, "layer_types[%lld]", l);
            return err_set(jc->err, jc->file, key, "expected \"sliding_attention\" or "
                           "\"full_attention\" (got %s%.40s%s)", cJSON_IsString(v) ? "\"" : "",
                           cJSON_IsString(v) ? v->valuestring : "no string",
                           cJSON_IsString(v) ? "\"" : "");
        }
        full[l] = (unsigned char)!sliding;
    }
    *given = 1;
    return 0;
}

/* t->window = w on the layers full[] leaves (layers entries, 1: full attention), kept in
 * t->full_layers (a copy) unless every layer has the window; no window when w is 0 or no
 * layer has it. */
int tf_set_windows(const jctx *jc, transformer *t, long long w, const unsigned char *full)
{
    long long nfull = 0;
    for (long long l = 0; l < t->layers; l++) nfull += full[l] != 0;
    free(t->full_layers);
    t->full_layers = NULL;
    t->window = nfull < t->layers ? w : 0;
    if (!t->window || !nfull) return 0;
    if (!(t->full_layers = malloc((size_t)t->layers)))
        return err_set(jc->err, jc->file, NULL, "out of memory");
    memcpy(t->full_layers, full, (size_t)t->layers);
    return 0;
}

/* The sliding window of a mistral, qwen2, qwen3, gemma2 or gemma3_text config into t->window
 * and t->full_layers, by transformers' rules (phi3, starcoder2 and mixtral: mistral's).
 * mistral: sliding_window (null or absent: none) on every layer. qwen2, qwen3
 * (configuration_qwen2.py / configuration_qwen3.py): sliding_window counts only with
 * use_sliding_window true (default false), and then on the layers layer_types marks
 * "sliding_attention", or without it the layers at index >= max_window_layers (default 28).
 * gemma2, gemma3_text: sliding_window (default 4096; null: none) on the layers layer_types
 * marks, or without it gemma2's even layers (index % 2 == 0) and gemma3_text's all but every
 * sliding_window_pattern-th (default 6: index + 1 a multiple of it is full). sliding_window,
 * when given, is checked whatever else says. */
int tf_get_window(const jctx *jc, const cJSON *root, tf_fam f, transformer *t)
{
    long long w = 0, first = 28, pattern = 6;
    int use = f != F_QWEN2 && f != F_QWEN3, given = 0, gemma = f == F_GEMMA2 || f == F_GEMMA3;
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    if (gemma && !sw) w = 4096;
    if (tf_get_dim(jc, root, "sliding_window", 0, &w)) return -1;
    unsigned char *full = calloc((size_t)t->layers, 1);
    if (!full) return err_set(jc->err, jc->file, NULL, "out of memory");
    int rc = -1;
    if (f == F_QWEN2 || f == F_QWEN3) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "max_window_layers");
        if (tf_get_flag(jc, root, "use_sliding_window", &use) ||
            (m && !cJSON_IsNull(m) &&
             json_get_int(jc, root, "", "max_window_layers", 0, 0, TF_MAX_DIM, &first)))
            goto done;
        for (long long l = 0; l < t->layers; l++) full[l] = l < first;
    } else if (f == F_GEMMA2) {
        for (long long l = 0; l < t->layers; l++) full[l] = (l + 1) % 2 == 0;
    } else if (f == F_GEMMA3) {
        if (tf_get_dim(jc, root, "sliding_window_pattern", 0, &pattern)) goto done;
        for (long long l = 0; l < t->layers; l++) full[l] = (l + 1) % pattern == 0;
    }
    if (f != F_MISTRAL && tf_get_layer_types(jc, root, t->layers, full, &given)) goto done;
    rc = tf_set_windows(jc, t, use ? w : 0, full);
done:
    free(full);
    return rc;
}
