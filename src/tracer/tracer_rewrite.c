/* The tracer's IL rewriting (see tracer_impl.h): a traced method's body wrapped in the span
 * probes' calls (enter, exit, exception) with its locals and exception clauses extended. */
#include "tracer/tracer_impl.h"

/* ---- IL rewriting -------------------------------------------------------------------- */

static void b_fnptr(clrmux_il_builder *b, void *fn)
{
    clrmux_il_b_op_arg(b, CLRMUX_IL_OP_LDC_I8, (int64_t)(intptr_t)fn);
    clrmux_il_b_op(b, CONV_I);
}

/* 1 when module mod is the assembly `name`. */
static int module_is(struct tracer *t, ModuleID mod, const char *name)
{
    AssemblyID asm_id = 0;
    WCHAR w[256];
    ULONG len = 0;
    char a[256];
    if (FAILED(ICorProfilerInfo5_GetModuleInfo(t->info, mod, NULL, 0, NULL, NULL, &asm_id)) ||
        FAILED(ICorProfilerInfo5_GetAssemblyInfo(t->info, asm_id, 256, &len, w, NULL, NULL)))
        return 1; /* unknown: as if it were (no join) */
    tracer_to_utf8(w, len, a, sizeof a);
    return strcasecmp(a, name) == 0;
}

/* What a method returns, for its span: a task (Task, Task<T>, ValueTask, ValueTask<T>) keeps
 * the span open until it completes; anything else ends it at the return. */
enum ret_kind { RET_OTHER, RET_TASK, RET_VALUETASK };

static enum ret_kind return_kind(IMetaDataImport2 *imp, const uint8_t *ret, size_t len)
{
    size_t i = 0;
    if (len && (ret[0] == CLRMUX_ELEMENT_TYPE_CMOD_OPT || ret[0] == CLRMUX_ELEMENT_TYPE_CMOD_REQD))
        return RET_OTHER; /* a modified return type: left as is */
    int generic = i < len && ret[i] == CLRMUX_ELEMENT_TYPE_GENERICINST;
    i += (size_t)generic;
    if (i >= len || (ret[i] != CLRMUX_ELEMENT_TYPE_CLASS && ret[i] != CLRMUX_ELEMENT_TYPE_VALUETYPE))
        return RET_OTHER;
    int valuetype = ret[i++] == CLRMUX_ELEMENT_TYPE_VALUETYPE;
    /* TypeDefOrRefOrSpecEncoded (II.23.2.8): a compressed unsigned integer */
    uint32_t v;
    if (i < len && !(ret[i] & 0x80)) {
        v = ret[i];
    } else if (i + 1 < len && (ret[i] & 0xC0) == 0x80) {
        v = (uint32_t)(ret[i] & 0x3F) << 8 | ret[i + 1];
    } else if (i + 3 < len && (ret[i] & 0xE0) == 0xC0) {
        v = (uint32_t)(ret[i] & 0x1F) << 24 | (uint32_t)ret[i + 1] << 16 | (uint32_t)ret[i + 2] << 8 | ret[i + 3];
    } else {
        return RET_OTHER;
    }
    if ((v & 3) > 1) /* a TypeSpec: not a task type */
        return RET_OTHER;
    mdToken tok = ((v & 3) ? mdtTypeRef : mdtTypeDef) | (v >> 2);
    char name[512];
    if (tracer_type_full_name(imp, tok, name, sizeof name, 0) != 0)
        return RET_OTHER;
    if (!valuetype && !strcmp(name, generic ? "System.Threading.Tasks.Task`1" : "System.Threading.Tasks.Task"))
        return RET_TASK;
    if (valuetype && !strcmp(name, generic ? "System.Threading.Tasks.ValueTask`1" : "System.Threading.Tasks.ValueTask"))
        return RET_VALUETASK;
    return RET_OTHER;
}

/* 1 when method tok's declaring type is a value type (its `this` is a managed pointer). */
static int declared_by_value_type(IMetaDataImport2 *imp, mdMethodDef tok)
{
    mdTypeDef td = 0;
    mdToken ext = 0;
    char name[512];
    if (FAILED(IMetaDataImport2_GetMethodProps(imp, tok, &td, NULL, 0, NULL, NULL, NULL, NULL, NULL, NULL)) ||
        FAILED(IMetaDataImport2_GetTypeDefProps(imp, td, NULL, 0, NULL, NULL, &ext)))
        return 1; /* unknown: as if it were (no `this` passed) */
    if (!ext || tracer_type_full_name(imp, ext, name, sizeof name, 0) != 0)
        return 0; /* System.Object, an interface */
    return !strcmp(name, "System.ValueType") || !strcmp(name, "System.Enum");
}

/* Loads argument i (0-based, after `this`) as an object: a value type boxed; by-ref, pointer
 * and modified types as null. */
static int emit_arg_object(clrmux_il_builder *b, IMetaDataEmit2 *emit, const uint8_t *msig,
                           const clrmux_il_method_sig *ms, uint32_t i, int has_this, char *why, size_t whylen)
{
    const uint8_t *ty = msig + ms->param_offset[i];
    size_t len = ms->param_len[i];
    switch (len ? ty[0] : 0) {
    case CLRMUX_ELEMENT_TYPE_CLASS: case CLRMUX_ELEMENT_TYPE_OBJECT: case CLRMUX_ELEMENT_TYPE_SZARRAY:
    case CLRMUX_ELEMENT_TYPE_ARRAY: case 0x0E /* STRING */:
        clrmux_il_b_var(b, CLRMUX_IL_LDARG, i + (uint32_t)has_this);
        break;
    case 0x02: case 0x03: case 0x04: case 0x05: case 0x06: case 0x07: case 0x08: case 0x09: case 0x0A:
    case 0x0B: case 0x0C: case 0x0D: case CLRMUX_ELEMENT_TYPE_I: case CLRMUX_ELEMENT_TYPE_U:
    case CLRMUX_ELEMENT_TYPE_VALUETYPE: case CLRMUX_ELEMENT_TYPE_GENERICINST: case CLRMUX_ELEMENT_TYPE_VAR:
    case CLRMUX_ELEMENT_TYPE_MVAR: {
        mdTypeSpec spec = 0;
        HRESULT hr = IMetaDataEmit2_GetTokenFromTypeSpec(emit, ty, (ULONG)len, &spec);
        if (FAILED(hr)) {
            snprintf(why, whylen, "GetTokenFromTypeSpec for argument %u failed with HRESULT %s", i, HR_STR(hr));
            return -1;
        }
        clrmux_il_b_var(b, CLRMUX_IL_LDARG, i + (uint32_t)has_this);
        clrmux_il_b_token(b, CLRMUX_IL_OP_BOX, (uint32_t)spec);
        break;
    }
    default: /* by-ref, pointer, modified, typedref */
        clrmux_il_b_op(b, CLRMUX_IL_OP_LDNULL);
    }
    return 0;
}

/* A bytecode integration's call (integ.h): IntegEnter(this, a0, a1, a2, a3, more, slot, integ),
 * each argument as an object; more: null, or an object[] of arguments 4..max_arg when the
 * definition reads past arg3 (only those pay for the array). */
static int emit_integ_enter(clrmux_il_builder *b, IMetaDataEmit2 *emit, IMetaDataImport2 *imp, mdMethodDef tok,
                            const uint8_t *msig, const clrmux_il_method_sig *ms, uint32_t slot, int integ,
                            int max_arg, void *fn, mdSignature sig, char *why, size_t whylen)
{
    int has_this = (ms->call_conv & 0x20) != 0;
    if (has_this && !declared_by_value_type(imp, tok))
        clrmux_il_b_var(b, CLRMUX_IL_LDARG, 0);
    else
        clrmux_il_b_op(b, CLRMUX_IL_OP_LDNULL);
    for (uint32_t i = 0; i < 4; i++) {
        if (i >= ms->param_count)
            clrmux_il_b_op(b, CLRMUX_IL_OP_LDNULL);
        else if (emit_arg_object(b, emit, msig, ms, i, has_this, why, whylen) != 0)
            return -1;
    }
    uint32_t last = max_arg < 0 ? 0 : (uint32_t)max_arg + 1;
    if (last > ms->param_count)
        last = ms->param_count;
    _Static_assert(CLRMUX_INTEG_MAX_ARG < CLRMUX_IL_SIG_PARAMS, "an argN a definition may read is one the sig locates");
    if (last > 4) {
        /* new object[last - 4] { arg4, ... } */
        static const uint8_t object_sig[] = {CLRMUX_ELEMENT_TYPE_OBJECT};
        mdTypeSpec object_spec = 0;
        HRESULT hr = IMetaDataEmit2_GetTokenFromTypeSpec(emit, object_sig, sizeof object_sig, &object_spec);
        if (FAILED(hr)) {
            snprintf(why, whylen, "GetTokenFromTypeSpec for object failed with HRESULT %s", HR_STR(hr));
            return -1;
        }
        clrmux_il_b_ldc_i4(b, (int32_t)(last - 4));
        clrmux_il_b_token(b, CLRMUX_IL_OP_NEWARR, (uint32_t)object_spec);
        for (uint32_t i = 4; i < last; i++) {
            clrmux_il_b_op(b, CLRMUX_IL_OP_DUP);
            clrmux_il_b_ldc_i4(b, (int32_t)(i - 4));
            if (emit_arg_object(b, emit, msig, ms, i, has_this, why, whylen) != 0)
                return -1;
            clrmux_il_b_op(b, CLRMUX_IL_OP_STELEM_REF);
        }
    } else {
        clrmux_il_b_op(b, CLRMUX_IL_OP_LDNULL);
    }
    clrmux_il_b_var(b, CLRMUX_IL_LDLOC, slot);
    clrmux_il_b_ldc_i4(b, integ);
    b_fnptr(b, fn);
    clrmux_il_b_token(b, CLRMUX_IL_OP_CALLI, (uint32_t)sig);
    return 0;
}

/* Rewrites method idx. Returns 0, or -1 with a reason in why. */
int tracer_rewrite(struct tracer *t, ModuleID mod, mdMethodDef tok, uint32_t idx, ICorProfilerFunctionControl *fc,
                   char *why, size_t whylen)
{
    LPCBYTE il = NULL;
    ULONG il_size = 0;
    HRESULT hr = ICorProfilerInfo5_GetILFunctionBody(t->info, mod, tok, &il, &il_size);
    if (FAILED(hr) || !il) {
        snprintf(why, whylen, "GetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        return -1;
    }
    char err[256];
    clrmux_il_body body;
    int rc = clrmux_il_parse(il, il_size, &body, NULL, err, sizeof err);
    if (rc) {
        snprintf(why, whylen, "cannot parse its IL: %s", err);
        return -1;
    }
    IUnknown *unk = NULL;
    IMetaDataEmit2 *emit = NULL;
    IMetaDataImport2 *imp = NULL;
    uint8_t *newsig = NULL, *code = NULL;
    clrmux_il_builder be, bn;
    clrmux_il_b_init(&be);
    clrmux_il_b_init(&bn);
    int result = -1;
    pthread_mutex_lock(&t->rw_lock);
    hr = ICorProfilerInfo5_GetModuleMetaData(t->info, mod, ofRead | ofWrite, &IID_IMetaDataEmit2, &unk);
    if (FAILED(hr) || !unk) {
        snprintf(why, whylen, "GetModuleMetaData(ofWrite) failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    emit = (IMetaDataEmit2 *)unk;
    if (FAILED(hr = IMetaDataEmit2_QueryInterface(emit, &IID_IMetaDataImport2, (void **)&imp)) || !imp) {
        snprintf(why, whylen, "no IMetaDataImport2 (HRESULT %s)", HR_STR(hr));
        goto out;
    }
    PCCOR_SIGNATURE msig = NULL;
    ULONG msig_len = 0;
    if (FAILED(hr = IMetaDataImport2_GetMethodProps(imp, tok, NULL, NULL, 0, NULL, NULL, &msig, &msig_len, NULL, NULL))) {
        snprintf(why, whylen, "GetMethodProps failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    clrmux_il_method_sig ms;
    if (clrmux_il_parse_method_sig(msig, msig_len, &ms, err, sizeof err)) {
        snprintf(why, whylen, "cannot read its signature: %s", err);
        goto out;
    }
    PCCOR_SIGNATURE lsig = NULL;
    ULONG lsig_len = 0;
    if (body.local_sig_tok &&
        FAILED(hr = IMetaDataImport2_GetSigFromToken(imp, (mdSignature)body.local_sig_tok, &lsig, &lsig_len))) {
        snprintf(why, whylen, "GetSigFromToken(0x%08X) failed with HRESULT %s", (unsigned)body.local_sig_tok,
                 HR_STR(hr));
        goto out;
    }
    /* the Activity join: once DiagnosticSource is loaded, never in CoreLib or DiagnosticSource;
     * not once the agent runs (its context carries Activity.Current's, tracer/agent.h) */
    mdMemberRef get_current = 0, get_id = 0;
    int join = 0;
    if (t->join_activity && atomic_load(&t->ds_loaded) && !atomic_load(&t->agent_ready) &&
        !module_is(t, mod, "System.Private.CoreLib") &&
        !module_is(t, mod, CLRMUX_DIAGNOSTICSOURCE)) {
        char jwhy[256];
        if (clrmux_activity_refs(emit, imp, &get_current, &get_id, jwhy, sizeof jwhy) == 0)
            join = 1;
        else
            LOG_WARN("tracer: %s: spans are not joined to Activity.Current: %s", t->methods[idx].name, jwhy);
    }
    /* with the agent (tracer/agent.h): a root span joins the flow's context (JoinRoot), and a
     * task's span lasts until the task completes */
    const struct clrmux_agent_managed *mg = clrmux_agent_managed_get();
    struct clrmux_agent_sigs as;
    if (mg) {
        char awhy[256];
        if (clrmux_agent_sigs_get(emit, &as, awhy, sizeof awhy) != 0) {
            LOG_WARN("tracer: %s: the agent's calls cannot be made from it: %s", t->methods[idx].name, awhy);
            mg = NULL;
        } else {
            join = 0; /* JoinRoot carries Activity.Current's context */
        }
    }
    enum ret_kind rk = ms.returns_void ? RET_OTHER : return_kind(imp, msig + ms.ret_offset, ms.ret_len);
    const struct clrmux_agent_managed *am = rk != RET_OTHER ? mg : NULL;
    mdTypeSpec vt_spec = 0;     /* ValueTask: its type and IsCompletedSuccessfully */
    mdMemberRef vt_done = 0;
    if (am) {
        static const uint8_t done_sig[] = {CLRMUX_SIG_HASTHIS, 0x00, CLRMUX_ELEMENT_TYPE_BOOLEAN};
        WCHAR wdone[32];
        clrmux_utf8_to_utf16("get_IsCompletedSuccessfully", wdone, 32);
        if (rk == RET_VALUETASK &&
            (FAILED(hr = IMetaDataEmit2_GetTokenFromTypeSpec(emit, msig + ms.ret_offset, (ULONG)ms.ret_len, &vt_spec)) ||
             FAILED(hr = IMetaDataEmit2_DefineMemberRef(emit, vt_spec, wdone, done_sig, sizeof done_sig, &vt_done)))) {
            LOG_WARN("tracer: %s: its span ends when it returns its ValueTask: a reference to it failed with HRESULT %s",
                     t->methods[idx].name, HR_STR(hr));
            am = NULL;
        }
    }
    atomic_store(&t->methods[idx].agent_pending, !mg && t->agent_path[0]);
    atomic_store(&t->methods[idx].joins, 0);
    /* new locals: int64 span slot, then the return value, then (join) a pinned string, then
     * (async) the previous async context */
    uint8_t types[1 + 512 + 2];
    size_t tlen = 1;
    uint32_t ntypes = 1;
    types[0] = CLRMUX_ELEMENT_TYPE_I8;
    if (!ms.returns_void) {
        if (ms.ret_len > sizeof types - 1) {
            snprintf(why, whylen, "return type signature too long (%zu bytes)", ms.ret_len);
            goto out;
        }
        memcpy(types + 1, msig + ms.ret_offset, ms.ret_len);
        tlen += ms.ret_len;
        ntypes++;
    }
    if (join) {
        types[tlen++] = 0x45; /* ELEMENT_TYPE_PINNED */
        types[tlen++] = 0x0E; /* ELEMENT_TYPE_STRING */
        ntypes++;
    }
    if (am) {
        types[tlen++] = CLRMUX_ELEMENT_TYPE_OBJECT;
        ntypes++;
    }
    size_t newsig_len = 0;
    uint32_t first_new = 0;
    if ((rc = clrmux_il_locals_append(lsig, lsig_len, types, tlen, ntypes, &newsig, &newsig_len, &first_new, err,
                                      sizeof err))) {
        snprintf(why, whylen, "cannot extend its locals: %s", err);
        goto out;
    }
    mdSignature local_tok = 0;
    if (FAILED(hr = IMetaDataEmit2_GetTokenFromSig(emit, newsig, (ULONG)newsig_len, &local_tok))) {
        snprintf(why, whylen, "GetTokenFromSig failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    struct clrmux_probe_sigs ps;
    char swhy[256];
    if (clrmux_probe_sigs_get(emit, imp, t->suppress_gc, &ps, swhy, sizeof swhy) != 0) {
        snprintf(why, whylen, "%s", swhy);
        goto out;
    }
    if (t->suppress_gc && !ps.suppressed)
        LOG_WARN("tracer: %s: the probes keep their GC transition: %s", t->methods[idx].name, swhy);
    uint32_t slot = first_new;
    uint32_t prev = first_new + (ms.returns_void ? 1 : 2) + (join ? 1 : 0); /* am: AsyncEnter's token */
    /* entry: slot = enter_fast(idx); if (slot < -1) slot = enter(idx) (the thread's first
     * span, or a deep recursion: the slow path allocates, with a GC transition) */
    uint32_t entered = clrmux_il_b_label(&be);
    clrmux_il_b_ldc_i4(&be, (int32_t)idx);
    b_fnptr(&be, (void *)clrmux_span_enter_fast);
    clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)ps.enter_fast);
    clrmux_il_b_op(&be, CLRMUX_IL_OP_DUP);
    clrmux_il_b_var(&be, CLRMUX_IL_STLOC, slot);
    clrmux_il_b_ldc_i8(&be, -1);
    clrmux_il_b_branch(&be, CLRMUX_IL_OP_BGE_S, entered);
    clrmux_il_b_ldc_i4(&be, (int32_t)idx);
    b_fnptr(&be, (void *)clrmux_span_enter);
    clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)ps.enter);
    clrmux_il_b_var(&be, CLRMUX_IL_STLOC, slot);
    clrmux_il_b_mark(&be, entered);
    if (join) {
        /* if (slot == 0) { var a = Activity.Current; if (a != null) { pinned string s = a.Id;
         *                  join((native int)s); s = null; } } */
        uint32_t pinned = first_new + (ms.returns_void ? 1 : 2);
        uint32_t end = clrmux_il_b_label(&be), none = clrmux_il_b_label(&be);
        clrmux_il_b_var(&be, CLRMUX_IL_LDLOC, slot);
        clrmux_il_b_branch(&be, CLRMUX_IL_OP_BRTRUE_S, end);
        clrmux_il_b_token(&be, CLRMUX_IL_OP_CALL, (uint32_t)get_current);
        clrmux_il_b_op(&be, CLRMUX_IL_OP_DUP);
        clrmux_il_b_branch(&be, CLRMUX_IL_OP_BRFALSE_S, none);
        clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLVIRT, (uint32_t)get_id);
        clrmux_il_b_var(&be, CLRMUX_IL_STLOC, pinned);
        clrmux_il_b_var(&be, CLRMUX_IL_LDLOC, pinned);
        clrmux_il_b_op(&be, CONV_I);
        b_fnptr(&be, (void *)clrmux_span_join);
        clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)ps.join);
        clrmux_il_b_op(&be, CLRMUX_IL_OP_LDNULL);
        clrmux_il_b_var(&be, CLRMUX_IL_STLOC, pinned);
        clrmux_il_b_branch(&be, CLRMUX_IL_OP_BR_S, end);
        clrmux_il_b_mark(&be, none);
        clrmux_il_b_op(&be, CLRMUX_IL_OP_POP);
        clrmux_il_b_mark(&be, end);
        atomic_store(&t->methods[idx].joins, 1);
    }
    if (mg && !clrmux_agent_pushes()) {
        /* if (slot == 0 && *join_word && ExecutionContext.Capture() != empty) JoinRoot(): a root
         * span continues the flow's innermost context, once there can be one (an Activity, an
         * async span: spans.h) and unless the flow has no AsyncLocal value at all (compared
         * inline: the JIT inlines Capture, and the common root span makes no call). In push
         * mode the thread's context is current already: no join. */
        uint32_t nested = clrmux_il_b_label(&be);
        clrmux_il_b_var(&be, CLRMUX_IL_LDLOC, slot);
        clrmux_il_b_branch(&be, CLRMUX_IL_OP_BRTRUE_S, nested);
        b_fnptr(&be, (void *)clrmux_spans_join_word());
        clrmux_il_b_op(&be, CLRMUX_IL_OP_LDIND_U4);
        clrmux_il_b_branch(&be, CLRMUX_IL_OP_BRFALSE_S, nested);
        mdToken capture = 0;
        char cwhy[256];
        if (mg->empty_context && clrmux_ec_capture_ref(emit, imp, &capture, cwhy, sizeof cwhy) == 0) {
            clrmux_il_b_token(&be, CLRMUX_IL_OP_CALL, (uint32_t)capture);
            b_fnptr(&be, mg->empty_context);
            clrmux_il_b_op(&be, CLRMUX_IL_OP_LDIND_REF);
            clrmux_il_b_branch(&be, CLRMUX_IL_OP_BEQ_S, nested);
        } else if (mg->empty_context) {
            LOG_DEBUG("tracer: %s: its root spans call JoinRoot in every flow: %s", t->methods[idx].name, cwhy);
        }
        b_fnptr(&be, mg->join_root);
        clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)as.join_root);
        clrmux_il_b_mark(&be, nested);
    }
    if (am) {
        /* token = AsyncEnter(slot): the span is the flow's context from here on */
        clrmux_il_b_var(&be, CLRMUX_IL_LDLOC, slot);
        b_fnptr(&be, am->async_enter);
        clrmux_il_b_token(&be, CLRMUX_IL_OP_CALLI, (uint32_t)as.async_enter);
        clrmux_il_b_var(&be, CLRMUX_IL_STLOC, prev);
        /* returning: AsyncRestore(token), the caller's flow gets its context back (left by an
         * exception: the agent's next reader of the context restores it) */
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, prev);
        b_fnptr(&bn, am->async_restore);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)as.async_restore);
    }
    int integ = t->methods[idx].target >= 0 ? t->targets[t->methods[idx].target].integ : 0;
    if (integ && mg) {
        /* after AsyncEnter: a task's span is the flow's context while the agent reads the call */
        if (emit_integ_enter(&be, emit, imp, tok, msig, &ms, slot, integ - 1, t->integs[integ - 1].max_arg,
                             mg->integ_enter, as.integ_enter, why, whylen) != 0)
            goto out;
    } else if (integ) {
        LOG_WARN("tracer: %s: an integration's method without the agent: a plain method span", t->methods[idx].name);
    }
    if (integ && mg && rk == RET_OTHER && t->integs[integ - 1].has_exit) {
        /* IntegExit((object)ret, slot, integ) where the method returns, before its exit probe (a
         * method that returns a task: below, with its task) */
        if (ms.returns_void) {
            clrmux_il_b_op(&bn, CLRMUX_IL_OP_LDNULL);
        } else {
            clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, first_new + 1);
            uint8_t r0 = msig[ms.ret_offset];
            if (r0 == CLRMUX_ELEMENT_TYPE_BYREF || r0 == CLRMUX_ELEMENT_TYPE_PTR || r0 == CLRMUX_ELEMENT_TYPE_CMOD_OPT ||
                r0 == CLRMUX_ELEMENT_TYPE_CMOD_REQD || r0 == CLRMUX_ELEMENT_TYPE_FNPTR) {
                clrmux_il_b_op(&bn, CLRMUX_IL_OP_POP);
                clrmux_il_b_op(&bn, CLRMUX_IL_OP_LDNULL);
            } else {
                mdTypeSpec rspec = 0;
                if (FAILED(hr = IMetaDataEmit2_GetTokenFromTypeSpec(emit, msig + ms.ret_offset, (ULONG)ms.ret_len, &rspec))) {
                    snprintf(why, whylen, "GetTokenFromTypeSpec for its return type failed with HRESULT %s", HR_STR(hr));
                    goto out;
                }
                clrmux_il_b_token(&bn, CLRMUX_IL_OP_BOX, (uint32_t)rspec);
            }
        }
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        clrmux_il_b_ldc_i4(&bn, integ - 1);
        b_fnptr(&bn, mg->integ_exit);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)as.integ_exit);
    }
    if (integ && am && t->integs[integ - 1].has_exit) {
        /* IntegExit((object)task, slot, integ | ASYNC) before OnTask / OnValueTask: the agent
         * reads the task's result when it completes, before its span ends (AsyncSpans.Finish) */
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, first_new + 1);
        if (rk == RET_VALUETASK)
            clrmux_il_b_token(&bn, CLRMUX_IL_OP_BOX, (uint32_t)vt_spec);
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        clrmux_il_b_ldc_i4(&bn, (integ - 1) | CLRMUX_INTEG_ASYNC);
        b_fnptr(&bn, mg->integ_exit);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)as.integ_exit);
    }
    /* exit: exit(slot), without a GC transition, where the method returns; a task's span:
     * OnTask(task, slot). The IL gets no exception clause: a span whose frame an exception
     * unwinds ends in the tracer's unwind callbacks (spans.h, clrmux_span_unwind_enter), where
     * the other children that monitor exceptions do not see it, as they would a filter's or a
     * fault's ExceptionSearchFilterEnter and ExceptionUnwindFinallyEnter. */
    if (am && rk == RET_TASK) {
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, first_new + 1); /* the returned task */
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        b_fnptr(&bn, am->on_task);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)as.on_task);
    } else if (am) {
        /* a ValueTask: if (ret.IsCompletedSuccessfully) exit(slot); else
         *   ret = (ValueTask<T>)OnValueTask((object)ret, slot)   (the slow path boxes) */
        uint32_t slow = clrmux_il_b_label(&bn), end = clrmux_il_b_label(&bn);
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOCA, first_new + 1);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALL, (uint32_t)vt_done);
        clrmux_il_b_branch(&bn, CLRMUX_IL_OP_BRFALSE_S, slow);
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        b_fnptr(&bn, (void *)clrmux_span_exit);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)ps.exit_fast);
        clrmux_il_b_branch(&bn, CLRMUX_IL_OP_BR_S, end);
        clrmux_il_b_mark(&bn, slow);
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, first_new + 1);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_BOX, (uint32_t)vt_spec);
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        b_fnptr(&bn, am->on_value_task);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)as.on_value_task);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_UNBOX_ANY, (uint32_t)vt_spec);
        clrmux_il_b_var(&bn, CLRMUX_IL_STLOC, first_new + 1);
        clrmux_il_b_mark(&bn, end);
    } else {
        clrmux_il_b_var(&bn, CLRMUX_IL_LDLOC, slot);
        b_fnptr(&bn, (void *)clrmux_span_exit);
        clrmux_il_b_token(&bn, CLRMUX_IL_OP_CALLI, (uint32_t)ps.exit_fast);
    }
    if (clrmux_il_b_finish(&be, err, sizeof err) || clrmux_il_b_finish(&bn, err, sizeof err)) {
        snprintf(why, whylen, "cannot build the probes: %s", err);
        goto out;
    }
    clrmux_il_wrap_spec spec = {
        .entry = be.data, .entry_len = be.len,
        .ret_local = ms.returns_void ? CLRMUX_IL_NO_LOCAL : first_new + 1,
        .local_sig_tok = (uint32_t)local_tok,
        .extra_max_stack = 11, /* task, slot, function pointer; an integration's 8 arguments, its pointer,
                                  and while the array is filled: the array, its copy, an index, a value */
        .exit_normal = bn.data, .exit_normal_len = bn.len,
        .no_eh = 1,
    };
    if ((rc = clrmux_il_wrap(&body, &spec, err, sizeof err))) {
        snprintf(why, whylen, "cannot wrap its IL: %s", err);
        goto out;
    }
    size_t code_len = 0;
    if ((rc = clrmux_il_emit(&body, &code, &code_len, err, sizeof err))) {
        snprintf(why, whylen, "cannot encode the new IL: %s", err);
        goto out;
    }
    if (FAILED(hr = ICorProfilerFunctionControl_SetILFunctionBody(fc, (ULONG)code_len, code))) {
        snprintf(why, whylen, "SetILFunctionBody failed with HRESULT %s", HR_STR(hr));
        goto out;
    }
    snprintf(why, whylen, "%u -> %zu bytes of IL", (unsigned)il_size, code_len);
    result = 0;
out:
    pthread_mutex_unlock(&t->rw_lock);
    if (imp)
        IMetaDataImport2_Release(imp);
    if (emit)
        IMetaDataEmit2_Release(emit);
    free(newsig);
    free(code);
    clrmux_il_b_free(&be);
    clrmux_il_b_free(&bn);
    clrmux_il_body_free(&body);
    return result;
}
