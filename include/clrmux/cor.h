/* Metadata types and interfaces of the runtime's cor.h / corhdr.h, in C.
 *
 * Source: dotnet/runtime src/coreclr/inc/cor.h and corhdr.h (token types, CorElementType
 * from ECMA-335 II.23.1.16, HCORENUM, ASSEMBLYMETADATA) and, for the interfaces
 * IMetaDataImport/2, IMetaDataEmit/2, IMetaDataAssemblyImport/Emit, the generated method
 * list gen/metadata_list.h (vtable order = ABI). */
#ifndef CLRMUX_COR_H
#define CLRMUX_COR_H

#include "com.h"

/* Metadata tokens (ECMA-335 II.22): top byte = table, low 24 bits = row id. */
typedef int32_t mdToken;
typedef mdToken mdModule, mdTypeRef, mdTypeDef, mdFieldDef, mdMethodDef, mdParamDef,
    mdInterfaceImpl, mdMemberRef, mdCustomAttribute, mdPermission, mdSignature, mdEvent,
    mdProperty, mdModuleRef, mdTypeSpec, mdAssembly, mdAssemblyRef, mdFile, mdExportedType,
    mdManifestResource, mdGenericParam, mdMethodSpec, mdGenericParamConstraint, mdString,
    mdCPToken;

/* Token table tags (CorTokenType, corhdr.h). */
#define mdtModule 0x00000000
#define mdtTypeRef 0x01000000
#define mdtTypeDef 0x02000000
#define mdtFieldDef 0x04000000
#define mdtMethodDef 0x06000000
#define mdtParamDef 0x08000000
#define mdtMemberRef 0x0a000000
#define mdtSignature 0x11000000
#define mdtModuleRef 0x1a000000
#define mdtTypeSpec 0x1b000000
#define mdtAssembly 0x20000000
#define mdtAssemblyRef 0x23000000
#define mdtMethodSpec 0x2b000000
#define mdtString 0x70000000
#define mdTokenNil ((mdToken)0)
#define mdTypeDefNil ((mdTypeDef)mdtTypeDef)
#define mdMethodDefNil ((mdMethodDef)mdtMethodDef)
#define TypeFromToken(tk) ((uint32_t)(tk) & 0xff000000u)
#define RidFromToken(tk) ((uint32_t)(tk) & 0x00ffffffu)

typedef uint32_t CorElementType; /* ECMA-335 II.23.1.16 element types, ELEMENT_TYPE_* */
enum {
    ELEMENT_TYPE_END = 0x00, ELEMENT_TYPE_VOID = 0x01, ELEMENT_TYPE_BOOLEAN = 0x02,
    ELEMENT_TYPE_CHAR = 0x03, ELEMENT_TYPE_I1 = 0x04, ELEMENT_TYPE_U1 = 0x05,
    ELEMENT_TYPE_I2 = 0x06, ELEMENT_TYPE_U2 = 0x07, ELEMENT_TYPE_I4 = 0x08,
    ELEMENT_TYPE_U4 = 0x09, ELEMENT_TYPE_I8 = 0x0a, ELEMENT_TYPE_U8 = 0x0b,
    ELEMENT_TYPE_R4 = 0x0c, ELEMENT_TYPE_R8 = 0x0d, ELEMENT_TYPE_STRING = 0x0e,
    ELEMENT_TYPE_PTR = 0x0f, ELEMENT_TYPE_BYREF = 0x10, ELEMENT_TYPE_VALUETYPE = 0x11,
    ELEMENT_TYPE_CLASS = 0x12, ELEMENT_TYPE_VAR = 0x13, ELEMENT_TYPE_ARRAY = 0x14,
    ELEMENT_TYPE_GENERICINST = 0x15, ELEMENT_TYPE_TYPEDBYREF = 0x16, ELEMENT_TYPE_I = 0x18,
    ELEMENT_TYPE_U = 0x19, ELEMENT_TYPE_FNPTR = 0x1b, ELEMENT_TYPE_OBJECT = 0x1c,
    ELEMENT_TYPE_SZARRAY = 0x1d, ELEMENT_TYPE_MVAR = 0x1e, ELEMENT_TYPE_CMOD_REQD = 0x1f,
    ELEMENT_TYPE_CMOD_OPT = 0x20, ELEMENT_TYPE_INTERNAL = 0x21, ELEMENT_TYPE_MAX = 0x22,
    ELEMENT_TYPE_SENTINEL = 0x41, ELEMENT_TYPE_PINNED = 0x45
};

typedef BYTE COR_SIGNATURE;
typedef COR_SIGNATURE *PCOR_SIGNATURE;
typedef const COR_SIGNATURE *PCCOR_SIGNATURE;
typedef const BYTE *LPCBYTE;
typedef BYTE *LPBYTE;
typedef void *HCORENUM;
typedef void const *UVCP_CONSTANT;
typedef const char *MDUTF8CSTR; /* UTF-8, owned by the metadata scope */

typedef struct {
    DWORD dwOSPlatformId;
    DWORD dwOSMajorVersion;
    DWORD dwOSMinorVersion;
} OSINFO;

/* Assembly version and culture (cor.h). szLocale/cbLocale in WCHARs. */
typedef struct {
    USHORT usMajorVersion;
    USHORT usMinorVersion;
    USHORT usBuildNumber;
    USHORT usRevisionNumber;
    LPWSTR szLocale;
    ULONG cbLocale;
    DWORD *rProcessor;
    ULONG ulProcessor;
    OSINFO *rOS;
    ULONG ulOS;
} ASSEMBLYMETADATA;

typedef struct COR_SECATTR {
    mdMemberRef tkCtor;
    const void *pCustomAttribute;
    uint32_t cbCustomAttribute;
} COR_SECATTR;

typedef struct _COR_FIELD_OFFSET {
    mdFieldDef ridOfField;
    ULONG ulOffset;
} COR_FIELD_OFFSET;

typedef enum CorSaveSize { cssAccurate = 0, cssQuick = 1, cssDiscardTransientCAs = 2 } CorSaveSize;

/* Method attributes (CorMethodAttr, ECMA-335 II.23.1.10) and P/Invoke map flags
 * (CorPinvokeMap, II.23.1.8) used when defining methods at run time. */
#define mdPublic 0x0006
#define mdStatic 0x0010
#define mdHideBySig 0x0080
#define mdPinvokeImpl 0x2000
#define miPreserveSig 0x0080
#define pmNoMangle 0x0001
#define pmCallConvCdecl 0x0200
#define tdAbstract 0x00000080
#define tdSealed 0x00000100

#include "gen/metadata_list.h"

typedef struct IMetaDataImport IMetaDataImport;
typedef struct IMetaDataImport2 IMetaDataImport2;
typedef struct IMetaDataEmit IMetaDataEmit;
typedef struct IMetaDataEmit2 IMetaDataEmit2;
typedef struct IMetaDataAssemblyImport IMetaDataAssemblyImport;
typedef struct IMetaDataAssemblyEmit IMetaDataAssemblyEmit;
CLRMUX_DECLARE_INTERFACE(IMetaDataImport)
CLRMUX_DECLARE_INTERFACE(IMetaDataImport2)
CLRMUX_DECLARE_INTERFACE(IMetaDataEmit)
CLRMUX_DECLARE_INTERFACE(IMetaDataEmit2)
CLRMUX_DECLARE_INTERFACE(IMetaDataAssemblyImport)
CLRMUX_DECLARE_INTERFACE(IMetaDataAssemblyEmit)

#endif /* CLRMUX_COR_H */
