# The enter/leave (ELT) cases shared by tests/clr/elt.sh (the app run by dotnet) and
# tests/clr/arm64.sh (the app run by qemu-aarch64): the ELT children's loader.conf files, the
# check of their call counts on tests/clr/apps/eltapp (Fib 1973, Mix 1, Leaf 100) and the cases
# both suites run. Source it after defining ok, bad, FAKE (the fake children's directory) and
# WORK (a scratch directory). Each case takes the caller's runners as its first parameters:
#   ALONE TAG LIB MASK [VAR=VALUE...]   runs eltapp with the child FAKE/LIB as the only profiler
#                                       (CLSID ELT_A), RECORDER_MASK=MASK, RECORDER_OUT=WORK/TAG.rec
#   UNDER TAG CONF [VAR=VALUE...]       runs eltapp under clrmux with CONF, its log in WORK/TAG.log
#   SAME TAG DESC                       checks that run TAG's output equals the run without a profiler

ELT=0x1000           # COR_PRF_MONITOR_ENTERLEAVE
ELT_INFO=0x0E001000  # + COR_PRF_ENABLE_FUNCTION_ARGS | RETVAL | FRAME_INFO
ELT_A="{A0000001-0000-0000-0000-000000000001}"
ELT_B="{B0000002-0000-0000-0000-000000000002}"
ELT_C="{C0000003-0000-0000-0000-000000000003}"
ELT_ARGS_LINE='^# args Mix 7 40000000000 2.5 (ranges 3)$'
ELT_RET_LINE='^# retval Mix 40000000009.5$'

# elt_conf FILE CHILD...: writes a loader.conf with the named children, each with its CLSID (so
# its RECORDER_*_<first 8 digits> variables): fast = libeltfast.so (A), info = libeltinfo.so (B),
# two = libelt2.so (C), rec = librecorder.so (B)
elt_conf() {
    local file=$1 name lib clsid
    shift
    : >"$file"
    for name in "$@"; do
        case $name in
            fast) lib=libeltfast.so clsid=$ELT_A ;;
            info) lib=libeltinfo.so clsid=$ELT_B ;;
            two) lib=libelt2.so clsid=$ELT_C ;;
            rec) lib=librecorder.so clsid=$ELT_B ;;
            *) echo "elt_conf: unknown child $name" >&2; return 1 ;;
        esac
        printf '[child %s]\npath = %s/%s\nclsid = %s\n' "$name" "$FAKE" "$lib" "$clsid" >>"$file"
    done
}
# elt_counts_ok FILE ENTER_FIB ENTER_MIX ENTER_LEAF: enters and leaves as given, no foreign client data
elt_counts_ok() {
    local f=$1
    grep -q "^enter Fib $2$" "$f" && grep -q "^leave Fib $2$" "$f" && grep -q "^enter Mix $3$" "$f" &&
        grep -q "^leave Mix $3$" "$f" && grep -q "^enter Leaf $4$" "$f" && grep -q "^leave Leaf $4$" "$f" &&
        grep -q "^# client-bad 0$" "$f"
}
elt_check_counts() { # elt_check_counts DESC FILE FIB MIX LEAF
    if [ -s "$2" ] && elt_counts_ok "$2" "$3" "$4" "$5"; then ok "$1"; else bad "$1" "$(grep -v '^[A-Z]' "$2" 2>/dev/null)"; fi
}
elt_check_args() { # elt_check_args DESC FILE: the child read Mix's arguments and return value
    if grep -q "$ELT_ARGS_LINE" "$2" && grep -q "$ELT_RET_LINE" "$2"; then ok "$1"; else bad "$1" "$(grep '^#' "$2")"; fi
}
elt_check_log() { # elt_check_log DESC LOG TEXT: clrmux's log names the hooks it installed
    if grep -qF "$3" "$2"; then ok "$1"; else bad "$1" "$(grep -i 'enter/leave' "$2")"; fi
}

# elt_case_fast_alone ALONE: the fast-path (ELT3, with a FunctionIDMapper) child alone, the
# reference for the runs under clrmux; its record is WORK/fast_alone.rec
elt_case_fast_alone() {
    "$1" fast_alone libeltfast.so $ELT ELT_MAPPER=1
    elt_check_counts "fast-path (ELT3) child alone counts every enter/leave" "$WORK/fast_alone.rec" 1973 1 100
}

# elt_case_fast_path UNDER SAME TAG: two fast-path-compatible children (ELT3 with a mapper, ELT2
# without), so clrmux installs its fast-path stubs; records WORK/TAG_a.rec and WORK/TAG_c.rec
elt_case_fast_path() {
    local under=$1 same=$2 tag=$3
    elt_conf "$WORK/$tag.conf" fast two
    "$under" "$tag" "$WORK/$tag.conf" RECORDER_MASK_A0000001=$ELT ELT_MAPPER_A0000001=1 \
        RECORDER_OUT_A0000001="$WORK/${tag}_a.rec" RECORDER_MASK_C0000003=$ELT RECORDER_OUT_C0000003="$WORK/${tag}_c.rec"
    "$same" "$tag" "fast path"
    elt_check_log "two ELT3/ELT2 children without slow-path flags: fast path installed" "$WORK/$tag.log" \
        "enter/leave hooks for 2 child(ren), fast path"
    elt_check_counts "fast path: ELT3 child with a mapper sees every enter/leave once, with its own client data" \
        "$WORK/${tag}_a.rec" 1973 1 100
    elt_check_counts "fast path: ELT2 child without a mapper sees every enter/leave once, with the FunctionID" \
        "$WORK/${tag}_c.rec" 1973 1 100
}
