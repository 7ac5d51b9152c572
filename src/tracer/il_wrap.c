/* The wrap rewriter (il.h, clrmux_il_wrap): a method body wrapped in entry and exit
 * snippets, inside try/filter/finally clauses or with none. */
#include "tracer/il_internal.h"

/* ---- wrap rewrite ---- */

static int parse_snippet(const char *name, const uint8_t *code, size_t len, clrmux_il_body *out,
                         char *err, size_t errlen)
{
    char sub[160] = "";
    int rc = clrmux_il_parse_code(code, len, out, sub, sizeof sub);
    if (rc)
        return fail(err, errlen, rc, "%s snippet: %s", name, sub);
    for (uint32_t i = 0; i < out->n_instrs; i++) {
        uint16_t op = out->instrs[i].opcode;
        if (op == CLRMUX_IL_OP_RET || op == CLRMUX_IL_OP_JMP || op == CLRMUX_IL_OP_LEAVE ||
            op == CLRMUX_IL_OP_LEAVE_S || op == CLRMUX_IL_OP_ENDFILTER ||
            op == CLRMUX_IL_OP_ENDFINALLY || op == CLRMUX_IL_OP_RETHROW || op == CLRMUX_IL_OP_TAIL) {
            uint32_t off = out->instrs[i].offset;
            clrmux_il_body_free(out);
            return fail(err, errlen, CLRMUX_IL_E_ARG,
                        "%s snippet: opcode 0x%02x at IL_%04x is not allowed in a snippet", name,
                        op, off);
        }
    }
    return 0;
}

/* Rewrite the snippet's targets t (end included) to NEW_TARGET(base + t) and
 * shallow-copy its instructions into dst: switch tables stay owned by the
 * snippet; clrmux_il_replace deep-copies them. */
static void splice(clrmux_il_instr *dst, clrmux_il_body *snip, uint32_t base)
{
    for (uint32_t i = 0; i < snip->n_instrs; i++) {
        clrmux_il_instr *in = &snip->instrs[i];
        if (is_branch(in->kind))
            in->target = CLRMUX_IL_NEW_TARGET(base + in->target);
        for (uint32_t j = 0; in->kind == K_SW && j < in->n_targets; j++)
            in->targets[j] = CLRMUX_IL_NEW_TARGET(base + in->targets[j]);
        dst[i] = *in;
    }
}

/* Inserts the parsed snippet `en` before instruction 0 of w; the snippet's branches to its
 * own end go to w's old first instruction. `en`'s instructions are moved (shallow). */
static int prepend_parsed(clrmux_il_body *w, clrmux_il_body *en, char *err, size_t errlen)
{
    uint32_t ne = en->n_instrs;
    clrmux_il_instr *pre = calloc(ne, sizeof *pre);
    if (!pre)
        return fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    for (uint32_t i = 0; i < ne; i++) { /* end of snippet -> pre-edit index 0 */
        clrmux_il_instr *in = &en->instrs[i];
        if (is_branch(in->kind))
            in->target = in->target == ne ? 0 : CLRMUX_IL_NEW_TARGET(in->target);
        for (uint32_t j = 0; in->kind == K_SW && j < in->n_targets; j++)
            in->targets[j] = in->targets[j] == ne ? 0 : CLRMUX_IL_NEW_TARGET(in->targets[j]);
        pre[i] = *in;
    }
    int rc = clrmux_il_insert(w, 0, pre, ne, err, errlen);
    free(pre);
    return rc;
}

int clrmux_il_prepend(clrmux_il_body *b, const uint8_t *code, size_t len, uint16_t max_stack, char *err,
                      size_t errlen)
{
    if (!b || !code || !len || !b->n_instrs)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    clrmux_il_body en = {0};
    int rc = parse_snippet("prefix", code, len, &en, err, errlen);
    if (!rc)
        rc = prepend_parsed(b, &en, err, errlen);
    clrmux_il_body_free(&en);
    if (rc)
        return rc;
    if (max_stack > b->max_stack)
        b->max_stack = max_stack;
    return clrmux_il_layout(b, err, errlen);
}

int clrmux_il_wrap(clrmux_il_body *b, const clrmux_il_wrap_spec *s, char *err, size_t errlen)
{
    if (!b || !s || (!s->entry && s->entry_len) || (!s->exit && s->exit_len) ||
        (!s->filter && s->filter_len) || (!s->exit_normal && s->exit_normal_len) ||
        (s->no_eh && (s->exit_len || s->filter_len)))
        return fail(err, errlen, CLRMUX_IL_E_ARG, "invalid argument");
    if (!b->n_instrs)
        return fail(err, errlen, CLRMUX_IL_E_ARG, "method body has no code");
    if (s->ret_local != CLRMUX_IL_NO_LOCAL && s->ret_local > UINT16_MAX)
        return fail(err, errlen, CLRMUX_IL_E_RANGE, "return local index %u > 65535",
                    s->ret_local);
    for (uint32_t i = 0; i < b->n_instrs; i++) {
        const clrmux_il_instr *in = &b->instrs[i];
        if (in->opcode == CLRMUX_IL_OP_JMP)
            return fail(err, errlen, CLRMUX_IL_E_UNSUPPORTED,
                        "method uses jmp (IL_%04x), which cannot be wrapped", in->offset);
        /* a prefix (III.2) applies to the instruction after it: one at the end, or before a
         * ret (which the wrap replaces), would end up on the wrap's own code */
        if (is_prefix(in->opcode) && (i + 1 == b->n_instrs || b->instrs[i + 1].opcode == CLRMUX_IL_OP_RET))
            return fail(err, errlen, CLRMUX_IL_E_UNSUPPORTED,
                        "prefix 0x%04x at IL_%04x %s; the method cannot be wrapped", in->opcode, in->offset,
                        i + 1 == b->n_instrs ? "ends the code with no instruction to apply to" : "precedes ret");
    }

    static const uint8_t default_filter[] = {CLRMUX_IL_OP_POP, CLRMUX_IL_OP_LDC_I4_0};
    clrmux_il_body en = {0}, ex = {0}, fi = {0}, xn = {0}, w = {0};
    clrmux_il_instr *tail = NULL;
    int rc = parse_snippet("entry", s->entry, s->entry_len, &en, err, errlen);
    if (!rc)
        rc = parse_snippet("exit", s->exit, s->exit_len, &ex, err, errlen);
    if (!rc)
        rc = s->filter_len ? parse_snippet("filter", s->filter, s->filter_len, &fi, err, errlen)
                           : parse_snippet("filter", default_filter, sizeof default_filter, &fi,
                                           err, errlen);
    int fault = s->exit_normal_len != 0, no_eh = s->no_eh != 0;
    if (!rc && fault)
        rc = parse_snippet("exit_normal", s->exit_normal, s->exit_normal_len, &xn, err, errlen);
    if (!rc && (rc = clrmux_il_body_clone(b, &w)))
        fail(err, errlen, rc, "out of memory");

    /* 1. drop tail. prefixes: references to them move to the call. */
    for (uint32_t i = 0; !rc && i < w.n_instrs;)
        if (w.instrs[i].opcode == CLRMUX_IL_OP_TAIL)
            rc = clrmux_il_replace(&w, i, 1, NULL, 0, err, errlen);
        else
            i++;

    /* 2. append: FILTER endfilter | pop rethrow | EXIT endfinally | END: [EXIT_NORMAL] [ldloc] ret
     * (no_eh: only END: [EXIT_NORMAL] [ldloc] ret) */
    int has_ret = s->ret_local != CLRMUX_IL_NO_LOCAL;
    uint32_t nf = fi.n_instrs, nx = ex.n_instrs, nn = xn.n_instrs;
    uint32_t nt = (no_eh ? 0 : nf + 1 + 2 + nx + 1) + nn + 1 + (uint32_t)has_ret;
    uint32_t body_n = w.n_instrs;
    if (!rc && !(tail = calloc(nt, sizeof *tail)))
        rc = fail(err, errlen, CLRMUX_IL_E_NOMEM, "out of memory");
    if (!rc) {
        uint32_t k = 0;
        if (!no_eh) {
            splice(tail, &fi, 0);
            k = nf;
            tail[k++] = clrmux_il_make(CLRMUX_IL_OP_ENDFILTER, 0);
            tail[k++] = clrmux_il_make(CLRMUX_IL_OP_POP, 0);
            tail[k++] = clrmux_il_make(CLRMUX_IL_OP_RETHROW, 0);
            splice(tail + k, &ex, k);
            k += nx;
            tail[k++] = clrmux_il_make(CLRMUX_IL_OP_ENDFINALLY, 0); /* endfault: the same opcode */
        }
        splice(tail + k, &xn, k);
        k += nn;
        if (has_ret)
            clrmux_il_make_var(CLRMUX_IL_LDLOC, s->ret_local, &tail[k++]);
        tail[k++] = clrmux_il_make(CLRMUX_IL_OP_RET, 0);
        rc = clrmux_il_insert(&w, body_n, tail, nt, err, errlen);
    }

    /* 3. each ret of the body -> [stloc ret_local] leave.s END (br.s with no_eh; widened by
     * layout). */
    uint32_t end_idx = body_n + nt - 1 - (uint32_t)has_ret - nn;
    uint16_t jump = no_eh ? CLRMUX_IL_OP_BR_S : CLRMUX_IL_OP_LEAVE_S;
    for (uint32_t i = 0; !rc && i < body_n;) {
        if (w.instrs[i].opcode != CLRMUX_IL_OP_RET) {
            i++;
            continue;
        }
        clrmux_il_instr rep[2];
        uint32_t m = 0;
        if (has_ret)
            clrmux_il_make_var(CLRMUX_IL_STLOC, s->ret_local, &rep[m++]);
        rep[m++] = clrmux_il_make(jump, end_idx);
        rc = clrmux_il_replace(&w, i, 1, rep, m, err, errlen);
        i += m;
        body_n += m - 1;
        end_idx += m - 1;
    }

    /* 4. entry snippet before everything; its end target is the old first instruction. */
    if (!rc && en.n_instrs)
        rc = prepend_parsed(&w, &en, err, errlen);

    /* 5. clauses: filter (inner) then finally or fault (outer), after the existing ones. */
    if (!rc && !no_eh) {
        uint32_t ne = en.n_instrs, fstart = w.n_instrs - nt, hstart = fstart + nf + 1;
        uint32_t fin = hstart + 2;
        clrmux_il_eh filt = {CLRMUX_IL_EH_FILTER, ne, fstart, hstart, fin, fstart, 0};
        clrmux_il_eh outer = {fault ? CLRMUX_IL_EH_FAULT : CLRMUX_IL_EH_FINALLY, ne, fin, fin, fin + nx + 1, 0, 0};
        rc = clrmux_il_add_eh(&w, &filt, err, errlen);
        if (!rc)
            rc = clrmux_il_add_eh(&w, &outer, err, errlen);
    }
    if (!rc) {
        if (!w.fat)
            w.flags = CLRMUX_IL_FAT_FORMAT | CLRMUX_IL_INIT_LOCALS;
        else if (!w.local_sig_tok)
            w.flags |= CLRMUX_IL_INIT_LOCALS;
        w.fat = 1;
        w.local_sig_tok = s->local_sig_tok;
        uint32_t need = 1u + s->extra_max_stack; /* filter entry holds the exception */
        if (need > w.max_stack)
            w.max_stack = need > UINT16_MAX ? UINT16_MAX : (uint16_t)need;
        rc = clrmux_il_layout(&w, err, errlen);
    }
    free(tail);
    clrmux_il_body_free(&en);
    clrmux_il_body_free(&ex);
    clrmux_il_body_free(&fi);
    clrmux_il_body_free(&xn);
    if (rc) {
        clrmux_il_body_free(&w);
        return rc;
    }
    clrmux_il_body_free(b);
    *b = w;
    return 0;
}
