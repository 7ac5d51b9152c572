/* Interface version numbers, by name: CLRMUX_VER_ICorProfilerCallback4 == 4.
 * Used by the generated fan-out (a child is called only through the versions it answered)
 * and by the proxy's QueryInterface (a child sees only the Info versions the runtime has). */
#ifndef CLRMUX_VERSIONS_H
#define CLRMUX_VERSIONS_H

#define CLRMUX_VER_IUnknown 0
#define CLRMUX_VER_ICorProfilerCallback 1
#define CLRMUX_VER_ICorProfilerCallback2 2
#define CLRMUX_VER_ICorProfilerCallback3 3
#define CLRMUX_VER_ICorProfilerCallback4 4
#define CLRMUX_VER_ICorProfilerCallback5 5
#define CLRMUX_VER_ICorProfilerCallback6 6
#define CLRMUX_VER_ICorProfilerCallback7 7
#define CLRMUX_VER_ICorProfilerCallback8 8
#define CLRMUX_VER_ICorProfilerCallback9 9
#define CLRMUX_VER_ICorProfilerCallback10 10
#define CLRMUX_VER_ICorProfilerCallback11 11
#define CLRMUX_VER_ICorProfilerInfo 1
#define CLRMUX_VER_ICorProfilerInfo2 2
#define CLRMUX_VER_ICorProfilerInfo3 3
#define CLRMUX_VER_ICorProfilerInfo4 4
#define CLRMUX_VER_ICorProfilerInfo5 5
#define CLRMUX_VER_ICorProfilerInfo6 6
#define CLRMUX_VER_ICorProfilerInfo7 7
#define CLRMUX_VER_ICorProfilerInfo8 8
#define CLRMUX_VER_ICorProfilerInfo9 9
#define CLRMUX_VER_ICorProfilerInfo10 10
#define CLRMUX_VER_ICorProfilerInfo11 11
#define CLRMUX_VER_ICorProfilerInfo12 12
#define CLRMUX_VER_ICorProfilerInfo13 13
#define CLRMUX_VER_ICorProfilerInfo14 14
#define CLRMUX_VER_ICorProfilerInfo15 15

#define CLRMUX_CALLBACK_MAX_VERSION 11
#define CLRMUX_INFO_MAX_VERSION 15

/* IIDs by version, index 1..max (index 0 unused). */
#define CLRMUX_CALLBACK_IIDS \
    { NULL, &IID_ICorProfilerCallback, &IID_ICorProfilerCallback2, &IID_ICorProfilerCallback3, \
      &IID_ICorProfilerCallback4, &IID_ICorProfilerCallback5, &IID_ICorProfilerCallback6, \
      &IID_ICorProfilerCallback7, &IID_ICorProfilerCallback8, &IID_ICorProfilerCallback9, \
      &IID_ICorProfilerCallback10, &IID_ICorProfilerCallback11 }
#define CLRMUX_INFO_IIDS \
    { NULL, &IID_ICorProfilerInfo, &IID_ICorProfilerInfo2, &IID_ICorProfilerInfo3, \
      &IID_ICorProfilerInfo4, &IID_ICorProfilerInfo5, &IID_ICorProfilerInfo6, \
      &IID_ICorProfilerInfo7, &IID_ICorProfilerInfo8, &IID_ICorProfilerInfo9, \
      &IID_ICorProfilerInfo10, &IID_ICorProfilerInfo11, &IID_ICorProfilerInfo12, \
      &IID_ICorProfilerInfo13, &IID_ICorProfilerInfo14, &IID_ICorProfilerInfo15 }

/* Splits a route tuple (KIND, LOW, HIGH) into macro arguments. */
#define CLRMUX_ROUTE_APPLY(M, I, D, R, N, P, A, ROUTE) CLRMUX_ROUTE_APPLY1(M, I, D, R, N, P, A, CLRMUX_EXPAND ROUTE)
#define CLRMUX_ROUTE_APPLY1(...) CLRMUX_ROUTE_APPLY2(__VA_ARGS__)
#define CLRMUX_ROUTE_APPLY2(M, I, D, R, N, P, A, K, L, H) M##K(I, D, R, N, P, A, L, H)

#endif
