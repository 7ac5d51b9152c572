#!/usr/bin/env python3
"""Generate include/clrmux/gen/*.h from the runtime's own interface definitions.

The profiling ABI is written once, as data: one X-macro line per method, in vtable
order, with its return type, parameters, argument names and (for callbacks) the
event-mask route that decides which children receive it. Everything else (vtable
structs, the mux fan-out, the info-proxy forwarding, the routing table) is expanded
from these lists by the C preprocessor.

Inputs (not part of this repository; read them from dotnet/runtime or dotnet/diagnostics):
    corprof.idl  src/coreclr/inc/corprof.idl      ICorProfilerCallback*, ICorProfilerInfo*, ...
    cor.h        src/coreclr/inc/cor.h            IMetaDataImport/2, IMetaDataEmit/2, IMetaDataAssembly*

Usage: tools/gen_abi.py CORPROF_IDL COR_H OUTDIR
The output is checked against shared/abi/corprof-vtables.tsv by tests/unit/test_abi.c.
"""
import re
import sys

# Which children receive each callback (see src/loader/route.h for the kinds).
# (kind, low COR_PRF_MONITOR mask, high COR_PRF_HIGH_MONITOR mask)
M = "COR_PRF_MONITOR_"
H = "COR_PRF_HIGH_"
ROUTES = {
    # lifecycle: the mux handles these itself
    "Initialize": ("SELF", "0", "0"),
    "Shutdown": ("SELF", "0", "0"),
    "InitializeForAttach": ("SELF", "0", "0"),
    "ProfilerAttachComplete": ("ALL", "0", "0"),
    "ProfilerDetachSucceeded": ("SELF", "0", "0"),  # per child: src/loader/detach.c
    "LoadAsNotificationOnly": ("SELF", "0", "0"),
    # COR_PRF_MONITOR_APPDOMAIN_LOADS
    **{n: ("MASK", M + "APPDOMAIN_LOADS", "0") for n in [
        "AppDomainCreationStarted", "AppDomainCreationFinished",
        "AppDomainShutdownStarted", "AppDomainShutdownFinished"]},
    **{n: ("MASK", M + "ASSEMBLY_LOADS", "0") for n in [
        "AssemblyLoadStarted", "AssemblyLoadFinished",
        "AssemblyUnloadStarted", "AssemblyUnloadFinished"]},
    **{n: ("MASK", M + "MODULE_LOADS", "0") for n in [
        "ModuleLoadStarted", "ModuleLoadFinished", "ModuleUnloadStarted",
        "ModuleUnloadFinished", "ModuleAttachedToAssembly"]},
    **{n: ("MASK", M + "CLASS_LOADS", "0") for n in [
        "ClassLoadStarted", "ClassLoadFinished", "ClassUnloadStarted", "ClassUnloadFinished"]},
    "FunctionUnloadStarted": ("MASK", M + "FUNCTION_UNLOADS", "0"),
    # JIT compilation: routed by mask, written by hand (held-back ReJIT requests, compose.h)
    **{n: ("JIT", M + "JIT_COMPILATION", "0") for n in ["JITCompilationStarted", "JITCompilationFinished"]},
    **{n: ("MASK", M + "JIT_COMPILATION", "0") for n in [
        "JITFunctionPitched",
        "DynamicMethodJITCompilationStarted", "DynamicMethodJITCompilationFinished"]},
    # out-parameter merges: the mux ANDs the children's answers
    "JITInlining": ("MERGE", M + "JIT_COMPILATION", "0"),
    "JITCachedFunctionSearchStarted": ("MERGE", M + "CACHE_SEARCHES", "0"),
    "JITCachedFunctionSearchFinished": ("MASK", M + "CACHE_SEARCHES", "0"),
    **{n: ("MASK", M + "THREADS", "0") for n in [
        "ThreadCreated", "ThreadDestroyed", "ThreadAssignedToOSThread", "ThreadNameChanged"]},
    **{n: ("MASK", M + "REMOTING", "0") for n in [
        "RemotingClientInvocationStarted", "RemotingClientSendingMessage",
        "RemotingClientReceivingReply", "RemotingClientInvocationFinished",
        "RemotingServerReceivingMessage", "RemotingServerInvocationStarted",
        "RemotingServerInvocationReturned", "RemotingServerSendingReply"]},
    **{n: ("MASK", M + "CODE_TRANSITIONS", "0") for n in [
        "UnmanagedToManagedTransition", "ManagedToUnmanagedTransition"]},
    **{n: ("MASK", M + "SUSPENDS", "0") for n in [
        "RuntimeSuspendStarted", "RuntimeSuspendFinished", "RuntimeSuspendAborted",
        "RuntimeResumeStarted", "RuntimeResumeFinished", "RuntimeThreadSuspended",
        "RuntimeThreadResumed"]},
    **{n: ("MASK", M + "GC", "0") for n in [
        "ObjectsAllocatedByClass", "ObjectReferences", "RootReferences", "RootReferences2",
        "FinalizeableObjectQueued", "HandleCreated", "HandleDestroyed",
        "ConditionalWeakTableElementReferences"]},
    **{n: ("MASK", M + "GC", H + "BASIC_GC") for n in [
        "GarbageCollectionStarted", "GarbageCollectionFinished"]},
    **{n: ("MASK", M + "GC", H + "MONITOR_GC_MOVED_OBJECTS") for n in [
        "MovedReferences", "MovedReferences2", "SurvivingReferences", "SurvivingReferences2"]},
    "ObjectAllocated": ("MASK", M + "OBJECT_ALLOCATED",
                        H + "MONITOR_LARGEOBJECT_ALLOCATED | " + H + "MONITOR_PINNEDOBJECT_ALLOCATED"),
    **{n: ("MASK", M + "EXCEPTIONS", "0") for n in [
        "ExceptionThrown", "ExceptionSearchFunctionEnter", "ExceptionSearchFunctionLeave",
        "ExceptionSearchFilterEnter", "ExceptionSearchFilterLeave",
        "ExceptionSearchCatcherFound", "ExceptionOSHandlerEnter", "ExceptionOSHandlerLeave",
        "ExceptionUnwindFunctionEnter", "ExceptionUnwindFunctionLeave",
        "ExceptionUnwindFinallyEnter", "ExceptionUnwindFinallyLeave",
        "ExceptionCatcherEnter", "ExceptionCatcherLeave"]},
    **{n: ("MASK", M + "CLR_EXCEPTIONS", "0") for n in [
        "ExceptionCLRCatcherFound", "ExceptionCLRCatcherExecute"]},
    **{n: ("MASK", M + "CCW", "0") for n in [
        "COMClassicVTableCreated", "COMClassicVTableDestroyed"]},
    # ReJIT: only the children that asked for ReJIT of that method
    **{n: ("REJIT", "COR_PRF_ENABLE_REJIT", "0") for n in [
        "ReJITCompilationStarted", "GetReJITParameters", "ReJITCompilationFinished", "ReJITError"]},
    "GetAssemblyReferences": ("MASK", "0", H + "ADD_ASSEMBLY_REFERENCES"),
    "ModuleInMemorySymbolsUpdated": ("MASK", "0", H + "IN_MEMORY_SYMBOLS_UPDATED"),
    "DynamicMethodUnloaded": ("MASK", "0", H + "MONITOR_DYNAMIC_FUNCTION_UNLOADS"),
    # EventPipe: delivered events go to the child that started the session
    "EventPipeEventDelivered": ("EVENTPIPE", "0", H + "MONITOR_EVENT_PIPE"),
    "EventPipeProviderCreated": ("MASK", "0", H + "MONITOR_EVENT_PIPE"),
}

IDL_INTERFACES = None  # all of them
COR_H_INTERFACES = ["IMetaDataImport", "IMetaDataImport2", "IMetaDataEmit", "IMetaDataEmit2",
                    "IMetaDataAssemblyImport", "IMetaDataAssemblyEmit"]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text


SAL = re.compile(r"\b_{1,2}[A-Z][A-Za-z0-9_]*\b\s*(\((?:[^()]|\([^()]*\))*\))?")


def parse_param(p, is_idl):
    p = p.strip()
    if is_idl:
        p = re.sub(r"^\[[^\]]*\]", "", p).strip()
    else:
        p = SAL.sub(" ", p).strip()
    p = re.sub(r"\s+", " ", p)
    if p in ("", "void"):
        return None
    m = re.match(r"^(.*?)([A-Za-z_][A-Za-z0-9_]*)\s*(\[[^\]]*\])?$", p)
    if not m:
        raise SystemExit("cannot parse parameter: %r" % p)
    typ, name, arr = m.group(1).strip(), m.group(2), m.group(3)
    typ = re.sub(r"\s*\*", " *", typ).replace("* *", "**").strip()
    if arr:
        typ = typ + " *"
    typ = typ.replace(" *", "*").replace("*", " *").replace("  ", " ").strip()
    return typ, name


def split_params(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return out


def parse_idl(text):
    text = strip_comments(text)
    text = re.sub(r"cpp_quote\([^\n]*\)", " ", text)
    ifaces = []
    for m in re.finditer(r"\[\s*object\s*,\s*uuid\(([0-9A-Fa-f-]+)\)[^\]]*\]\s*interface\s+(\w+)\s*:\s*(\w+)\s*\{(.*?)\n\}", text, re.S):
        uuid, name, base, body = m.group(1).upper(), m.group(2), m.group(3), m.group(4)
        methods = []
        for mm in re.finditer(r"(HRESULT|PVOID|void)\s+(\w+)\s*\((.*?)\)\s*;", body, re.S):
            params = [x for x in (parse_param(p, True) for p in split_params(mm.group(3))) if x]
            methods.append((mm.group(1), mm.group(2), params))
        ifaces.append((name, base, uuid, methods))
    return ifaces


def parse_cor_h(text, wanted):
    raw = text
    text = strip_comments(text)
    ifaces = []
    for name in wanted:
        g = re.search(r"EXTERN_GUID\(IID_%s\s*,\s*([^)]*)\)" % name, raw)
        parts = [int(x.strip(), 16) for x in g.group(1).split(",")]
        uuid = "%08X-%04X-%04X-%02X%02X-%s" % (parts[0], parts[1], parts[2], parts[3], parts[4],
                                              "".join("%02X" % b for b in parts[5:]))
        m = re.search(r"DECLARE_INTERFACE_\(\s*%s\s*,\s*(\w+)\s*\)\s*\{(.*?)\n\};" % name, text, re.S)
        base, body = m.group(1), m.group(2)
        methods = []
        for mm in re.finditer(r"STDMETHOD(?:_\(\s*([^,]+?)\s*,\s*(\w+)\s*\)|\s*\((\w+)\))\s*\((.*?)\)\s*PURE\s*;", body, re.S):
            ret = mm.group(1) or "HRESULT"
            mname = mm.group(2) or mm.group(3)
            params = [x for x in (parse_param(p, False) for p in split_params(mm.group(4))) if x]
            methods.append((ret, mname, params))
        ifaces.append((name, base, uuid, methods))
    return ifaces


def guid_init(uuid):
    a, b, c, d, e = uuid.split("-")
    bs = d + e
    return "{0x%s, 0x%s, 0x%s, {%s}}" % (a, b, c, ", ".join("0x" + bs[i:i + 2] for i in range(0, 16, 2)))


def emit(ifaces, guard, source, out, callbacks):
    w = out.write
    w("/* Generated by tools/gen_abi.py from %s. Do not edit by hand: regenerate.\n" % source)
    w(" * One line per method, in vtable order (the ABI):\n")
    w(" *   X(I, D, ret, Name, (, params...), (, args...), ROUTE)\n")
    w(" * I = the interface whose vtable is being expanded, D = the interface that declares\n")
    w(" * the method, ROUTE = (kind, low mask, high mask) for callbacks, (NONE, 0, 0) otherwise. */\n")
    w("#ifndef %s\n#define %s\n\n" % (guard, guard))
    for name, base, uuid, methods in ifaces:
        w("/* %s : %s, IID {%s} */\n" % (name, base, uuid))
        w("#define CLRMUX_IID_%s %s\n" % (name, guid_init(uuid)))
        w("#define CLRMUX_BASE_%s %s\n" % (name, base))
        w("#define CLRMUX_METHODS_%s(X, I) \\\n" % name)
        for ret, mname, params in methods:
            ptxt = "(" + "".join(", %s %s" % (t, n) if not t.endswith("*") else ", %s%s" % (t, n) for t, n in params) + ")"
            atxt = "(" + "".join(", %s" % n for t, n in params) + ")"
            if callbacks and name.startswith("ICorProfilerCallback"):
                if mname not in ROUTES:
                    raise SystemExit("no route for callback %s" % mname)
                route = "(%s, %s, %s)" % ROUTES[mname]
            else:
                route = "(NONE, 0, 0)"
            w("    X(I, %s, %s, %s, %s, %s, %s) \\\n" % (name, ret, mname, ptxt, atxt, route))
        w("    /* end of %s */\n" % name)
        w("#define CLRMUX_ALL_%s(X, I) CLRMUX_ALL_%s(X, I) CLRMUX_METHODS_%s(X, I)\n\n" % (name, base, name))
    w("/* COBJMACROS-style call macros, as MIDL generates them */\n#ifdef COBJMACROS\n")
    by_name = {i[0]: i for i in ifaces}

    def all_methods(n):
        if n == "IUnknown":
            return [("HRESULT", "QueryInterface", [("REFIID", "riid"), ("void **", "ppvObject")]),
                    ("ULONG", "AddRef", []), ("ULONG", "Release", [])]
        i = by_name[n]
        return all_methods(i[1]) + i[3]
    for name, base, uuid, methods in ifaces:
        for ret, mname, params in all_methods(name):
            args = "".join(",%s" % n for t, n in params)
            w("#define %s_%s(This%s) ( (This)->lpVtbl->%s(This%s) )\n" % (name, mname, args, mname, args))
    w("#endif /* COBJMACROS */\n\n#endif /* %s */\n" % guard)


def main():
    idl, cor_h, outdir = sys.argv[1:4]
    with open(idl) as f:
        prof = parse_idl(f.read())
    with open(cor_h) as f:
        meta = parse_cor_h(f.read(), COR_H_INTERFACES)
    with open(outdir + "/corprof_list.h", "w") as f:
        emit(prof, "CLRMUX_GEN_CORPROF_LIST_H", "the runtime's src/coreclr/inc/corprof.idl", f, True)
    with open(outdir + "/metadata_list.h", "w") as f:
        emit(meta, "CLRMUX_GEN_METADATA_LIST_H", "the runtime's src/coreclr/inc/cor.h", f, False)
    for name, base, uuid, methods in prof + meta:
        print(name, base, uuid, len(methods))


if __name__ == "__main__":
    main()
