/* EXPORT: how the fake child profilers export DllGetClassObject (dllexport on Windows,
 * default visibility elsewhere), and their one shared warning setting (COM methods that
 * ignore parameters). */
#ifndef FAKE_EXPORT_H
#define FAKE_EXPORT_H
#if defined(_WIN32)
#define EXPORT __declspec(dllexport)
#else
#define EXPORT __attribute__((visibility("default")))
#endif
#pragma GCC diagnostic ignored "-Wunused-parameter"
#endif
