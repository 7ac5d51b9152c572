/* ELT child, second generation: SetEnterLeaveFunctionHooks2 (FunctionID, client data, frame
 * info and, with COR_PRF_ENABLE_FUNCTION_ARGS / RETVAL, Mix's arguments and return value). */
#include "elt_common.h"

static void STDMETHODCALLTYPE on_enter2(FunctionID fid, UINT_PTR client, COR_PRF_FRAME_INFO frame,
                                        COR_PRF_FUNCTION_ARGUMENT_INFO *args)
{
    (void)frame;
    client = elt_mapper_kind ? client : fid; /* without a mapper: key by the FunctionID */
    elt_on_enter(client);
    struct elt_rec *r = elt_rec_of(client);
    if (r && r->watch == -2)
        elt_classify(r);
    if (r && r->watch == 1)
        elt_read_args(args);
}

static void STDMETHODCALLTYPE on_leave2(FunctionID fid, UINT_PTR client, COR_PRF_FRAME_INFO frame,
                                        COR_PRF_FUNCTION_ARGUMENT_RANGE *rv)
{
    (void)frame;
    client = elt_mapper_kind ? client : fid;
    elt_on_leave(client);
    struct elt_rec *r = elt_rec_of(client);
    if (r && r->watch == 1)
        elt_read_retval(rv);
}

static void STDMETHODCALLTYPE on_tailcall2(FunctionID fid, UINT_PTR client, COR_PRF_FRAME_INFO frame)
{
    (void)frame;
    elt_on_tailcall(elt_mapper_kind ? client : fid);
}

static void elt_set_hooks(ICorProfilerInfo5 *info)
{
    HRESULT hr = ICorProfilerInfo5_SetEnterLeaveFunctionHooks2(info, on_enter2, on_leave2, on_tailcall2);
    fk_fact(elt_self, "# SetEnterLeaveFunctionHooks2 hr=0x%08X%.0u", (DWORD)hr, 0);
}
