/* ELT child, WithInfo: SetEnterLeaveFunctionHooks3WithInfo; reads Mix's arguments and return
 * value through GetFunctionEnter3Info / GetFunctionLeave3Info (elt_common.h). */
#include "elt_common.h"

static FunctionID elt_fid_of(UINT_PTR id)
{
    if (!elt_mapper_kind)
        return id;
    struct elt_rec *r = (struct elt_rec *)id;
    return r && r->magic == elt_magic ? r->fid : 0;
}

static int elt_is_mix(UINT_PTR id)
{
    struct elt_rec *r = elt_rec_of(id);
    if (r && r->watch == -2) /* WithInfo hooks run on the slow path: metadata may be read */
        elt_classify(r);
    return r && r->watch == 1;
}

static void STDMETHODCALLTYPE on_enter(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    elt_on_enter(id.clientID);
    if (!elt_is_mix(id.clientID) || elt_args[0])
        return;
    COR_PRF_FRAME_INFO frame = 0;
    union { COR_PRF_FUNCTION_ARGUMENT_INFO a; unsigned char b[512]; } buf;
    ULONG cb = sizeof buf;
    if (SUCCEEDED(ICorProfilerInfo5_GetFunctionEnter3Info(elt_self->info, elt_fid_of(id.clientID), info, &frame, &cb, &buf.a)))
        elt_read_args(&buf.a);
}

static void STDMETHODCALLTYPE on_leave(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    elt_on_leave(id.clientID);
    if (!elt_is_mix(id.clientID) || elt_retval[0])
        return;
    COR_PRF_FRAME_INFO frame = 0;
    COR_PRF_FUNCTION_ARGUMENT_RANGE rv = {0, 0};
    if (SUCCEEDED(ICorProfilerInfo5_GetFunctionLeave3Info(elt_self->info, elt_fid_of(id.clientID), info, &frame, &rv)))
        elt_read_retval(&rv);
}

static void STDMETHODCALLTYPE on_tailcall(FunctionIDOrClientID id, COR_PRF_ELT_INFO info)
{
    (void)info;
    elt_on_tailcall(id.clientID);
}

static void elt_set_hooks(ICorProfilerInfo5 *info)
{
    HRESULT hr = ICorProfilerInfo5_SetEnterLeaveFunctionHooks3WithInfo(info, on_enter, on_leave, on_tailcall);
    fk_fact(elt_self, "# SetEnterLeaveFunctionHooks3WithInfo hr=0x%08X%.0u", (DWORD)hr, 0);
}
