/* Unit tests for EventPipe under the mux (src/loader/eventpipe.c): sessions owned by one
 * child, events routed by provider, each child's view filtered by its own keywords and level,
 * providers added to a session, the event metadata parser. */
#include "mux_fixture.h"

/* ---- EventPipe --------------------------------------------------------------------- */

/* Two children that monitor EventPipe, as most tests here use. */
static const struct child_spec k_two_ep_children[] = {
    {"a", 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE, NULL},
    {"b", 11, 0, COR_PRF_HIGH_MONITOR_EVENT_PIPE, NULL},
};

static void test_eventpipe_session_owner_only(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Microsoft-Windows-DotNETRuntime");
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, k_two_ep_children, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0];
    const char *const prov[] = {"Microsoft-Windows-DotNETRuntime"};
    EVENTPIPE_SESSION s;
    start_session(ca, prov, 1, &s);
    assert_int_equal(rt.sessions_started, 1);

    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(a->last_provider, 0x10);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 0);

    /* once a stops its session, its events stop */
    ICorProfilerInfo15 *pa = fake_child_info(ca);
    assert_int_equal(pa->lpVtbl->EventPipeStopSession(pa, s), S_OK);
    assert_int_equal(rt.sessions_stopped, 1);
    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 0);
    fake_mux_free(m);
}

static void test_eventpipe_routes_by_provider_name(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Provider-A");
    fake_runtime_add_provider(&rt, 0x20, "Provider-B");
    fake_runtime_add_provider(&rt, 0x30, "Provider-C");
    const struct child_spec spec[] = {
        k_two_ep_children[0],
        k_two_ep_children[1],
        /* a session but no EVENT_PIPE flag: the runtime delivers its events anyway (.NET 10) */
        {"c", 11, COR_PRF_MONITOR_THREADS, 0, NULL},
    };
    struct fake_child fc[3];
    struct clrmux_child *ch[3];
    struct clrmux_mux *m = mux_with_children(&rt, spec, 3, fc, ch);
    struct fake_child *a = &fc[0], *b = &fc[1], *c = &fc[2];
    struct clrmux_child *ca = ch[0], *cb = ch[1], *cc = ch[2];
    const char *const pa[] = {"Provider-A"};
    const char *const pb[] = {"Provider-B"};
    EVENTPIPE_SESSION s1, s2, s3;
    start_session(ca, pa, 1, &s1);
    start_session(cb, pb, 1, &s2);
    start_session(cc, pa, 1, &s3);
    assert_true(s1 != s2);

    deliver_event(m, 0x20);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 0);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 1);
    deliver_event(m, 0x10);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 1);
    deliver_event(m, 0x30); /* nobody's provider */
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(c, EventPipeEventDelivered), 1);
    fake_mux_free(m);
}

/* An event's metadata blob as the runtime builds it: id, name (here empty), keywords,
 * version, level, parameter count. */
static ULONG ep_meta(BYTE *b, DWORD id, UINT64 kw, UINT32 level)
{
    UINT32 zero = 0;
    memcpy(b, &id, 4);
    b[4] = b[5] = 0;
    memcpy(b + 6, &kw, 8);
    memcpy(b + 14, &zero, 4);
    memcpy(b + 18, &level, 4);
    memcpy(b + 22, &zero, 4);
    return 26;
}

static void deliver_meta(struct clrmux_mux *m, EVENTPIPE_PROVIDER provider, UINT64 kw, UINT32 level)
{
    static BYTE data[4];
    BYTE meta[32];
    ULONG n = ep_meta(meta, 7, kw, level);
    ICorProfilerCallback11 *mux = fake_mux_cb(m);
    data[0]++; /* a new event each time */
    mux->lpVtbl->EventPipeEventDelivered(mux, provider, 7, 0, n, meta, sizeof data, data, NULL, NULL, 0, 0, NULL);
}

static EVENTPIPE_SESSION start_kw(struct clrmux_child *c, const char *prov, UINT64 kw, UINT32 level)
{
    WCHAR name[64];
    clrmux_utf8_to_utf16(prov, name, 64);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, kw, level, NULL};
    ICorProfilerInfo15 *px = fake_child_info(c);
    EVENTPIPE_SESSION s = 0;
    assert_int_equal(px->lpVtbl->EventPipeStartSession(px, 1, &cfg, FALSE, &s), S_OK);
    return s;
}

/* Each child gets exactly the keywords and levels its own session asked for; the runtime's
 * session widens (a new one replaces the old) only when a view needs more. */
static void test_eventpipe_views_filter_keywords_and_levels(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "P");
    fake_runtime_add_provider(&rt, 0x20, "Q");
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, k_two_ep_children, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    EVENTPIPE_SESSION sa = start_kw(ca, "P", 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(rt.sessions_started, 1);
    EVENTPIPE_SESSION sb = start_kw(cb, "P", 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(rt.sessions_started, 2); /* wider keywords and level: replaced */
    assert_int_equal(rt.sessions_stopped, 1);
    assert_true(sa != sb);

    deliver_meta(m, 0x10, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 0);
    deliver_meta(m, 0x10, 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 1);
    deliver_meta(m, 0x10, 0x1, COR_PRF_EVENTPIPE_VERBOSE); /* a asked for Informational */
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 1);
    deliver_meta(m, 0x10, 0, COR_PRF_EVENTPIPE_LOGALWAYS); /* no keywords, LogAlways: both */
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 2);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 2);
    deliver_meta(m, 0x20, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL); /* nobody's provider */
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 2);

    /* a adds Q to its session: added to the runtime's session, no new session */
    WCHAR q[4];
    clrmux_utf8_to_utf16("Q", q, 4);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cq = {q, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL, NULL};
    ICorProfilerInfo15 *pa = fake_child_info(ca), *pb = fake_child_info(cb);
    assert_int_equal(pa->lpVtbl->EventPipeAddProviderToSession(pa, sa, cq), S_OK);
    assert_int_equal(rt.providers_added, 1);
    assert_int_equal(rt.sessions_started, 2);
    deliver_meta(m, 0x20, 0x1, COR_PRF_EVENTPIPE_INFORMATIONAL);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 3);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 2);
    /* a child cannot touch another's session */
    assert_int_equal(pb->lpVtbl->EventPipeStopSession(pb, sa), E_INVALIDARG);
    assert_int_equal(pb->lpVtbl->EventPipeAddProviderToSession(pb, sa, cq), E_INVALIDARG);

    /* b stops: only its view; the runtime session runs on for a */
    assert_int_equal(pb->lpVtbl->EventPipeStopSession(pb, sb), S_OK);
    assert_int_equal(rt.sessions_stopped, 1);
    deliver_meta(m, 0x10, 0x2, COR_PRF_EVENTPIPE_VERBOSE);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 2);
    assert_int_equal(pa->lpVtbl->EventPipeStopSession(pa, sa), S_OK);
    assert_int_equal(rt.sessions_stopped, 2); /* the last view: the runtime's session stops */
    fake_mux_free(m);
}

/* The metadata parser: short or malformed blobs are refused. */
static void test_eventpipe_parse_metadata(void **state)
{
    (void)state;
    BYTE b[64];
    UINT64 kw = 0;
    UINT32 level = 0;
    ULONG n = ep_meta(b, 80, 0x8000, 2);
    assert_int_equal(clrmux_ep_parse_metadata(b, n, &kw, &level), 0);
    assert_int_equal(kw, 0x8000);
    assert_int_equal(level, 2);
    assert_int_equal(clrmux_ep_parse_metadata(b, 10, &kw, &level), -1);
    assert_int_equal(clrmux_ep_parse_metadata(NULL, 0, &kw, &level), -1);
    /* a name that never ends */
    memset(b, 0x41, sizeof b);
    assert_int_equal(clrmux_ep_parse_metadata(b, sizeof b, &kw, &level), -1);
}

static void test_eventpipe_provider_added_to_session(void **state)
{
    (void)state;
    struct fake_runtime rt;
    fake_runtime_init(&rt, 15, 10);
    fake_runtime_add_provider(&rt, 0x10, "Provider-A");
    fake_runtime_add_provider(&rt, 0x40, "Provider-X");
    struct fake_child fc[2];
    struct clrmux_child *c[2];
    struct clrmux_mux *m = mux_with_children(&rt, k_two_ep_children, 2, fc, c);
    struct fake_child *a = &fc[0], *b = &fc[1];
    struct clrmux_child *ca = c[0], *cb = c[1];
    const char *const pa[] = {"Provider-A"};
    EVENTPIPE_SESSION s1, s2;
    start_session(ca, pa, 1, &s1);
    start_session(cb, pa, 1, &s2);
    /* a adds Provider-X to its session: X's events are a's, not b's */
    WCHAR name[32];
    clrmux_utf8_to_utf16("Provider-X", name, 32);
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {name, ~0ull, COR_PRF_EVENTPIPE_VERBOSE, NULL};
    ICorProfilerInfo15 *px = fake_child_info(ca);
    assert_int_equal(px->lpVtbl->EventPipeAddProviderToSession(px, s1, cfg), S_OK);
    assert_int_equal(rt.providers_added, 1);
    deliver_event(m, 0x40);
    assert_int_equal(FC_CALLS(a, EventPipeEventDelivered), 1);
    assert_int_equal(FC_CALLS(b, EventPipeEventDelivered), 0);
    fake_mux_free(m);
}


int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eventpipe_session_owner_only),
        cmocka_unit_test(test_eventpipe_routes_by_provider_name),
        cmocka_unit_test(test_eventpipe_provider_added_to_session),
        cmocka_unit_test(test_eventpipe_views_filter_keywords_and_levels),
        cmocka_unit_test(test_eventpipe_parse_metadata),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
