/*
 * export.h - FA_EXPORT marks a definition of flashattn.h's public API. The library is
 * built with hidden visibility, so a shared build exposes exactly what is marked.
 */
#ifndef FA_EXPORT_H
#define FA_EXPORT_H

#if defined(__GNUC__)
#define FA_EXPORT __attribute__((visibility("default")))
#else
#define FA_EXPORT
#endif

#endif /* FA_EXPORT_H */
