/* SPDX-License-Identifier: MIT */
/* Whole-file reads from the loader's own volume (SIMPLE_FILE_SYSTEM). */
#include "loader.h"

EFI_STATUS read_file(EFI_HANDLE device, const CHAR16 *path, UINTN max, void **buf, UINTN *len)
{
    EFI_FILE_HANDLE root, f;
    EFI_FILE_INFO *info;
    EFI_STATUS st;
    UINTN size, got;
    void *data;

    root = LibOpenRoot(device);
    if (!root)
        return EFI_NOT_FOUND;
    st = root->Open(root, &f, (CHAR16 *)path, EFI_FILE_MODE_READ, 0);
    root->Close(root);
    if (EFI_ERROR(st))
        return st;
    info = LibFileInfo(f);
    if (!info) {
        f->Close(f);
        return EFI_DEVICE_ERROR;
    }
    size = info->FileSize;
    FreePool(info);
    if (size > max) {
        f->Close(f);
        return EFI_BAD_BUFFER_SIZE;
    }
    data = AllocatePool(size ? size : 1);
    if (!data) {
        f->Close(f);
        return EFI_OUT_OF_RESOURCES;
    }
    got = size;
    st = f->Read(f, &got, data);
    f->Close(f);
    if (!EFI_ERROR(st) && got != size)
        st = EFI_END_OF_FILE; /* the file shrank under us */
    if (EFI_ERROR(st)) {
        FreePool(data);
        return st;
    }
    *buf = data;
    *len = size;
    return EFI_SUCCESS;
}

CHAR16 *to_ucs2(const char *ascii)
{
    UINTN n = 0;
    CHAR16 *s;

    while (ascii[n])
        n++;
    s = AllocatePool((n + 1) * sizeof(CHAR16));
    if (!s)
        return NULL;
    for (UINTN i = 0; i <= n; i++)
        s[i] = (CHAR16)(unsigned char)ascii[i];
    return s;
}
