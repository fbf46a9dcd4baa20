"""FAKE of DCGM's ``dcgm_structs`` binding module (tests only; not NVIDIA's code).

Same names and semantics as NVIDIA/DCGM ``testing/python3/dcgm_structs.py`` for the part the
migscope backend touches, written from that file's documented surface:

* ``DCGM_ST_*`` return codes with the real values; ``DCGMError(code)`` returns the subclass
  for that code (``DCGMError_ConnectionNotValid``, ...), carries ``.value``, prints the
  real message text, and ``dcgmExceptionClass(code)`` looks a subclass up.
* ``_dcgmInit(libDcgmPath=None)`` loads the library (here: the simulated one in
  :mod:`support.fake_dcgm.hostengine`) and raises ``DCGM_ST_LIBRARY_NOT_FOUND`` when there is
  none; ``_dcgmGetFunctionPointer(name)`` raises ``DCGM_ST_UNINITIALIZED`` before that and
  ``DCGM_ST_FUNCTION_NOT_FOUND`` for an unknown entry point; ``_dcgmCheckReturn(ret)`` raises
  ``DCGMError(ret)`` for a non-zero code.
* ctypes structures with the real field names and types: ``c_dcgmGroupEntityPair_t``,
  ``c_dcgmConnectV2Params_v2``, ``c_dcgmFieldValue_v2`` (``value`` union ``i64``/``dbl``/
  ``str``/``blob``), ``c_dcgmMigEntityInfo_t``, ``c_dcgmMigHierarchyInfo_v2``,
  ``c_dcgmMigHierarchy_v2``, ``c_dcgmDeviceIdentifiers_v1``, ``c_dcgmDeviceSettings_v2`` and
  ``c_dcgmDeviceAttributes_v3`` (without the clock, thermal and power-limit members, which
  the backend does not read). As in DCGM 4's bindings, char-array members read back as
  ``str`` (older bindings return ``bytes``; the backend accepts both).
"""

import ctypes
import importlib
import importlib.util
import sys
import threading
from pathlib import Path
from typing import ClassVar

import dcgmvalue  # noqa: F401 - the real module imports it the same way, by top-level name

DCGM_MAX_STR_LENGTH = 256
DCGM_MAX_NUM_DEVICES = 32
DCGM_MAX_BLOB_LENGTH = 4096
DCGM_MAX_NUM_GROUPS = 64
DCGM_GROUP_MAX_ENTITIES_V2 = 1024
DCGM_MAX_INSTANCES_PER_GPU = 8
DCGM_MAX_TOTAL_INSTANCES = 14
DCGM_MAX_HIERARCHY_INFO = DCGM_MAX_NUM_DEVICES * DCGM_MAX_TOTAL_INSTANCES

DCGM_OPERATION_MODE_AUTO = 1
DCGM_OPERATION_MODE_MANUAL = 2

DCGM_GROUP_DEFAULT = 0
DCGM_GROUP_EMPTY = 1

DCGM_FV_FLAG_LIVE_DATA = 0x00000001

DCGM_ST_OK = 0
DCGM_ST_BADPARAM = -1
DCGM_ST_GENERIC_ERROR = -3
DCGM_ST_MEMORY = -4
DCGM_ST_NOT_CONFIGURED = -5
DCGM_ST_NOT_SUPPORTED = -6
DCGM_ST_INIT_ERROR = -7
DCGM_ST_NVML_ERROR = -8
DCGM_ST_PENDING = -9
DCGM_ST_UNINITIALIZED = -10
DCGM_ST_TIMEOUT = -11
DCGM_ST_VER_MISMATCH = -12
DCGM_ST_UNKNOWN_FIELD = -13
DCGM_ST_NO_DATA = -14
DCGM_ST_STALE_DATA = -15
DCGM_ST_NOT_WATCHED = -16
DCGM_ST_NO_PERMISSION = -17
DCGM_ST_GPU_IS_LOST = -18
DCGM_ST_RESET_REQUIRED = -19
DCGM_ST_FUNCTION_NOT_FOUND = -20
DCGM_ST_CONNECTION_NOT_VALID = -21
DCGM_ST_GPU_NOT_SUPPORTED = -22
DCGM_ST_LIBRARY_NOT_FOUND = -25
DCGM_ST_DUPLICATE_KEY = -26
DCGM_ST_REQUIRES_ROOT = -29
DCGM_ST_FIELD_UNSUPPORTED_BY_API = -32
DCGM_ST_MODULE_NOT_LOADED = -33
DCGM_ST_PROFILING_NOT_SUPPORTED = -36
DCGM_ST_INSUFFICIENT_DRIVER_VERSION = -44
DCGM_ST_INSTANCE_NOT_FOUND = -45
DCGM_ST_COMPUTE_INSTANCE_NOT_FOUND = -46
DCGM_ST_NVML_NOT_LOADED = -56
DCGM_ST_NVML_DRIVER_TIMEOUT = -57

_MESSAGES = {
    DCGM_ST_OK: "Success",
    DCGM_ST_BADPARAM: "Bad parameter passed to function",
    DCGM_ST_GENERIC_ERROR: "Generic unspecified error",
    DCGM_ST_MEMORY: "Out of memory error",
    DCGM_ST_NOT_CONFIGURED: "Setting not configured",
    DCGM_ST_NOT_SUPPORTED: "Feature not supported",
    DCGM_ST_INIT_ERROR: "DCGM initialization error",
    DCGM_ST_NVML_ERROR: "NVML error",
    DCGM_ST_PENDING: "Object is in a pending state",
    DCGM_ST_UNINITIALIZED: "Object is in an undefined state",
    DCGM_ST_TIMEOUT: "Timeout",
    DCGM_ST_VER_MISMATCH: "API version mismatch",
    DCGM_ST_UNKNOWN_FIELD: "Unknown field",
    DCGM_ST_NO_DATA: "No data is available",
    DCGM_ST_STALE_DATA: "Data is considered stale",
    DCGM_ST_NOT_WATCHED: "Field is not being updated",
    DCGM_ST_NO_PERMISSION: "Not permissioned",
    DCGM_ST_GPU_IS_LOST: "GPU is unreachable",
    DCGM_ST_RESET_REQUIRED: "GPU requires a reset",
    DCGM_ST_FUNCTION_NOT_FOUND: "Unable to find function",
    DCGM_ST_CONNECTION_NOT_VALID: "The connection to the host engine is not valid any longer",
    DCGM_ST_GPU_NOT_SUPPORTED: "This GPU is not supported by DCGM",
    DCGM_ST_LIBRARY_NOT_FOUND: "DCGM library could not be found",
    DCGM_ST_DUPLICATE_KEY: "Duplicate key passed to function",
    DCGM_ST_REQUIRES_ROOT: (
        "This operation is not supported when the host engine is running as non root"
    ),
    DCGM_ST_FIELD_UNSUPPORTED_BY_API: "The given field ID is not supported by the API being called",
    DCGM_ST_MODULE_NOT_LOADED: (
        "This request is serviced by a module of DCGM that is not currently loaded"
    ),
    DCGM_ST_PROFILING_NOT_SUPPORTED: "Profiling is not supported for this group of GPUs or GPU",
    DCGM_ST_INSUFFICIENT_DRIVER_VERSION: (
        "The installed driver version is insufficient for this API"
    ),
    DCGM_ST_INSTANCE_NOT_FOUND: "The specified GPU instance does not exist",
    DCGM_ST_COMPUTE_INSTANCE_NOT_FOUND: "The specified GPU compute instance does not exist",
    DCGM_ST_NVML_NOT_LOADED: "NVML couldn't be loaded on this system",
    DCGM_ST_NVML_DRIVER_TIMEOUT: "NVML driver timeout error was detected",
}


class DCGMError(Exception):
    """A DCGM return code as an exception; ``DCGMError(code)`` picks the code's subclass."""

    _valClassMapping: ClassVar[dict] = {}

    def __new__(cls, value):
        if cls is DCGMError:
            cls = DCGMError._valClassMapping.get(value, cls)
        obj = Exception.__new__(cls)
        obj.value = value
        obj.info = None
        return obj

    def __init__(self, value=None):
        super().__init__(self.value)

    def __str__(self):
        msg = _MESSAGES.get(self.value, f"DCGM Error with code {self.value}")
        if self.info is not None:
            msg = f"{msg.rstrip('.')}: '{self.info}'"
        return msg

    def __eq__(self, other):
        return isinstance(other, DCGMError) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def SetAdditionalInfo(self, msg):
        self.info = msg


def _make_error_classes():
    module = sys.modules[__name__]
    for name in [n for n in dir(module) if n.startswith("DCGM_ST_")]:
        code = getattr(module, name)
        class_name = "DCGMError_" + "".join(p.capitalize() for p in name[8:].split("_"))

        def new(cls, value=None, _code=code):
            return DCGMError.__new__(cls, _code)

        error_class = type(class_name, (DCGMError,), {"__new__": new})
        error_class.__module__ = __name__
        setattr(module, class_name, error_class)
        DCGMError._valClassMapping[code] = error_class


_make_error_classes()


def dcgmExceptionClass(error_code):
    return DCGMError._valClassMapping.get(error_code)


# -- library loading (libdcgm.so.4 is simulated by support.fake_dcgm.hostengine) -------------

dcgmLib = None
libLoadLock = threading.Lock()
_dcgmLib_refcount = 0


def _hostengine():
    """The shared simulated library, reached by package path so all loads share one state."""
    try:
        return importlib.import_module("support.fake_dcgm.hostengine")
    except ImportError:
        name = "_fake_dcgm_hostengine"
        if name not in sys.modules:
            spec = importlib.util.spec_from_file_location(
                name, Path(__file__).with_name("hostengine.py")
            )
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
        return sys.modules[name]


def _LoadDcgmLibrary(libDcgmPath=None):
    global dcgmLib
    with libLoadLock:
        if dcgmLib is None:
            dcgmLib = _hostengine().load_library(libDcgmPath)
    if dcgmLib is None:
        _dcgmCheckReturn(DCGM_ST_LIBRARY_NOT_FOUND)


def _dcgmInit(libDcgmPath=None):
    global _dcgmLib_refcount
    _LoadDcgmLibrary(libDcgmPath)
    with libLoadLock:
        _dcgmLib_refcount += 1


def _dcgmGetFunctionPointer(name):
    if dcgmLib is None:
        raise DCGMError(DCGM_ST_UNINITIALIZED)
    try:
        return getattr(dcgmLib, name)
    except AttributeError:
        raise DCGMError(DCGM_ST_FUNCTION_NOT_FOUND) from None


def _dcgmCheckReturn(ret):
    if ret != DCGM_ST_OK:
        raise DCGMError(ret)
    return ret


def _dcgmShutdown():
    global _dcgmLib_refcount
    ret, _ = _dcgmGetFunctionPointer("dcgmShutdown")()
    _dcgmCheckReturn(ret)
    with libLoadLock:
        _dcgmLib_refcount = max(0, _dcgmLib_refcount - 1)


def make_dcgm_version(struct, ver):
    return ctypes.sizeof(struct) | (ver << 24)


# -- structures -------------------------------------------------------------------------------


class _DcgmStructure(ctypes.Structure):
    """Char arrays read back as str and accept str, as DCGM 4's bindings do."""

    def __getattribute__(self, key):
        value = super().__getattribute__(key)
        return value.decode("utf-8") if isinstance(value, bytes) else value

    def __setattr__(self, key, value):
        if isinstance(value, str):
            value = value.encode("utf-8")
        super().__setattr__(key, value)


class _DcgmUnion(ctypes.Union):
    def __getattribute__(self, key):
        value = super().__getattribute__(key)
        return value.decode("utf-8") if isinstance(value, bytes) else value

    def __setattr__(self, key, value):
        if isinstance(value, str):
            value = value.encode("utf-8")
        super().__setattr__(key, value)


class c_dcgmConnectV2Params_v2(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("persistAfterDisconnect", ctypes.c_uint),
        ("timeoutMs", ctypes.c_uint),
        ("addressIsUnixSocket", ctypes.c_uint),
    ]


c_dcgmConnectV2Params_version2 = make_dcgm_version(c_dcgmConnectV2Params_v2, 2)
c_dcgmConnectV2Params_version = c_dcgmConnectV2Params_version2


class c_dcgmGroupEntityPair_t(_DcgmStructure):
    _fields_ = [("entityGroupId", ctypes.c_uint32), ("entityId", ctypes.c_uint32)]

    def __eq__(self, other):
        return (self.entityGroupId, self.entityId) == (other.entityGroupId, other.entityId)


class c_dcgmMigEntityInfo_t(_DcgmStructure):
    _fields_ = [
        ("gpuUuid", ctypes.c_char * 128),
        ("nvmlGpuIndex", ctypes.c_uint),
        ("nvmlInstanceId", ctypes.c_uint),
        ("nvmlComputeInstanceId", ctypes.c_uint),
        ("nvmlMigProfileId", ctypes.c_uint),
        ("nvmlProfileSlices", ctypes.c_uint),
    ]


class c_dcgmMigHierarchyInfo_v2(_DcgmStructure):
    _fields_ = [
        ("entity", c_dcgmGroupEntityPair_t),
        ("parent", c_dcgmGroupEntityPair_t),
        ("info", c_dcgmMigEntityInfo_t),
    ]


class c_dcgmMigHierarchy_v2(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("count", ctypes.c_uint),
        ("entityList", c_dcgmMigHierarchyInfo_v2 * DCGM_MAX_HIERARCHY_INFO),
    ]


c_dcgmMigHierarchy_version2 = make_dcgm_version(c_dcgmMigHierarchy_v2, 2)


class c_dcgmFieldValue_v1_value(_DcgmUnion):
    _fields_ = [
        ("i64", ctypes.c_int64),
        ("dbl", ctypes.c_double),
        ("str", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("blob", ctypes.c_byte * DCGM_MAX_BLOB_LENGTH),
    ]


class c_dcgmFieldValue_v2(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("entityGroupId", ctypes.c_uint),
        ("entityId", ctypes.c_uint),
        ("fieldId", ctypes.c_ushort),
        ("fieldType", ctypes.c_short),
        ("status", ctypes.c_int),
        ("unused", ctypes.c_uint),
        ("ts", ctypes.c_int64),
        ("value", c_dcgmFieldValue_v1_value),
    ]


dcgmFieldValue_version2 = make_dcgm_version(c_dcgmFieldValue_v2, 2)


class c_dcgmDeviceIdentifiers_v1(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("brandName", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("deviceName", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("pciBusId", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("serial", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("uuid", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("vbios", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("inforomImageVersion", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("pciDeviceId", ctypes.c_uint32),
        ("pciSubSystemId", ctypes.c_uint32),
        ("driverVersion", ctypes.c_char * DCGM_MAX_STR_LENGTH),
        ("virtualizationMode", ctypes.c_uint32),
    ]


class c_dcgmDeviceMemoryUsage_v1(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("bar1Total", ctypes.c_uint),
        ("fbTotal", ctypes.c_uint),
        ("fbUsed", ctypes.c_uint),
        ("fbFree", ctypes.c_uint),
    ]


class c_dcgmDeviceSettings_v2(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("persistenceModeEnabled", ctypes.c_uint),
        ("migModeEnabled", ctypes.c_uint),
        ("confidentialComputeMode", ctypes.c_uint),
    ]


class c_dcgmDeviceAttributes_v3(_DcgmStructure):
    _fields_ = [
        ("version", ctypes.c_uint),
        ("identifiers", c_dcgmDeviceIdentifiers_v1),
        ("memoryUsage", c_dcgmDeviceMemoryUsage_v1),
        ("settings", c_dcgmDeviceSettings_v2),
    ]


dcgmDeviceAttributes_version3 = make_dcgm_version(c_dcgmDeviceAttributes_v3, 3)
