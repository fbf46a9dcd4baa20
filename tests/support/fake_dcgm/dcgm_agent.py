"""FAKE of DCGM's ``dcgm_agent`` binding module (tests only; not NVIDIA's code).

Each function has the name, parameters and return value of its counterpart in NVIDIA/DCGM
``testing/python3/dcgm_agent.py``: it fetches the C entry point through
``dcgm_structs._dcgmGetFunctionPointer`` (so nothing works before ``_dcgmInit``), calls it,
raises ``dcgm_structs.DCGMError`` for a non-zero ``dcgmReturn_t`` via ``_dcgmCheckReturn``,
and returns what the real wrapper returns:

* handles and group ids as ``ctypes.c_void_p`` (``dcgmStartEmbedded``, ``dcgmConnect_v2``,
  ``dcgmGroupCreate``, ``dcgmFieldGroupCreate``);
* ``dcgmGetAllSupportedDevices`` -> list of DCGM GPU ids;
* ``dcgmGetDeviceAttributes`` -> ``c_dcgmDeviceAttributes_v3``;
* ``dcgmGetGpuInstanceHierarchy`` -> ``c_dcgmMigHierarchy_v2`` (``count``, ``entityList``);
* ``dcgmEntitiesGetLatestValues(handle, entities, fieldIds, flags)`` -> a ctypes array of
  ``len(entities) * len(fieldIds)`` ``c_dcgmFieldValue_v2``, each with its own ``status``,
  built from ``entities`` the way the real wrapper builds its C array (so entities must be
  ``c_dcgmGroupEntityPair_t`` or ``(entityGroupId, entityId)`` tuples).

String arguments may be ``str`` or ``bytes`` (the real ``ensure_byte_strings`` decorator
encodes ``str``). The C side is :mod:`support.fake_dcgm.hostengine`.
"""

import ctypes

import dcgm_fields
import dcgm_structs

dcgmFP = dcgm_structs._dcgmGetFunctionPointer


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _id(handle):
    return handle.value if isinstance(handle, ctypes.c_void_p) else handle


def _call(name, *args):
    ret, result = dcgmFP(name)(*args)
    dcgm_structs._dcgmCheckReturn(ret)
    return result


def dcgmInit():
    return _call("dcgmInit")


def dcgmShutdown():
    return _call("dcgmShutdown")


def dcgmStartEmbedded(opMode):
    return ctypes.c_void_p(_call("dcgmStartEmbedded", opMode))


def dcgmStopEmbedded(dcgm_handle):
    return _call("dcgmStopEmbedded", _id(dcgm_handle))


def dcgmConnect_v2(ip_address, connectParams, version=dcgm_structs.c_dcgmConnectV2Params_version):
    connectParams.version = version
    return ctypes.c_void_p(_call("dcgmConnect_v2", _text(ip_address), connectParams))


def dcgmDisconnect(dcgm_handle):
    return _call("dcgmDisconnect", _id(dcgm_handle))


def dcgmGetAllSupportedDevices(dcgm_handle):
    return list(_call("dcgmGetAllSupportedDevices", _id(dcgm_handle)))


def dcgmGetDeviceAttributes(dcgm_handle, gpuId, version=dcgm_structs.dcgmDeviceAttributes_version3):
    if version != dcgm_structs.dcgmDeviceAttributes_version3:
        dcgm_structs._dcgmCheckReturn(dcgm_structs.DCGM_ST_VER_MISMATCH)
    raw = _call("dcgmGetDeviceAttributes", _id(dcgm_handle), int(gpuId))
    attrs = dcgm_structs.c_dcgmDeviceAttributes_v3()
    attrs.version = version
    ids = attrs.identifiers
    ids.deviceName = raw["deviceName"]
    ids.pciBusId = raw["pciBusId"]
    ids.pciDeviceId = raw["pciDeviceId"]
    ids.uuid = raw["uuid"]
    ids.driverVersion = raw["driverVersion"]
    attrs.settings.migModeEnabled = raw["migModeEnabled"]
    return attrs


def dcgmGetGpuInstanceHierarchy(dcgm_handle):
    entries = _call("dcgmGetGpuInstanceHierarchy", _id(dcgm_handle))
    hierarchy = dcgm_structs.c_dcgmMigHierarchy_v2()
    hierarchy.version = dcgm_structs.c_dcgmMigHierarchy_version2
    hierarchy.count = len(entries)
    for slot, entry in zip(hierarchy.entityList, entries, strict=False):
        slot.entity.entityGroupId, slot.entity.entityId = entry["entity"]
        slot.parent.entityGroupId, slot.parent.entityId = entry["parent"]
        for key, value in entry["info"].items():
            setattr(slot.info, key, value)
    return hierarchy


def dcgmGroupCreate(dcgm_handle, type, groupName):
    return ctypes.c_void_p(_call("dcgmGroupCreate", _id(dcgm_handle), type, _text(groupName)))


def dcgmGroupDestroy(dcgm_handle, group_id):
    return _call("dcgmGroupDestroy", _id(dcgm_handle), _id(group_id))


def dcgmGroupAddEntity(dcgm_handle, group_id, entityGroupId, entityId):
    return _call("dcgmGroupAddEntity", _id(dcgm_handle), _id(group_id), entityGroupId, entityId)


def dcgmFieldGroupCreate(dcgm_handle, fieldIds, fieldGroupName):
    ids = (ctypes.c_uint16 * len(fieldIds))(*fieldIds)
    return ctypes.c_void_p(
        _call("dcgmFieldGroupCreate", _id(dcgm_handle), list(ids), _text(fieldGroupName))
    )


def dcgmFieldGroupDestroy(dcgm_handle, fieldGroupId):
    return _call("dcgmFieldGroupDestroy", _id(dcgm_handle), _id(fieldGroupId))


def dcgmWatchFields(dcgm_handle, groupId, fieldGroupId, updateFreq, maxKeepAge, maxKeepSamples):
    return _call(
        "dcgmWatchFields",
        _id(dcgm_handle),
        _id(groupId),
        _id(fieldGroupId),
        ctypes.c_int64(updateFreq).value,
        ctypes.c_double(maxKeepAge).value,
        ctypes.c_int32(maxKeepSamples).value,
    )


def dcgmUnwatchFields(dcgm_handle, groupId, fieldGroupId):
    return _call("dcgmUnwatchFields", _id(dcgm_handle), _id(groupId), _id(fieldGroupId))


def dcgmUpdateAllFields(dcgm_handle, waitForUpdate):
    return _call("dcgmUpdateAllFields", _id(dcgm_handle), ctypes.c_int(waitForUpdate).value)


def dcgmEntitiesGetLatestValues(dcgmHandle, entities, fieldIds, flags):
    pairs = (dcgm_structs.c_dcgmGroupEntityPair_t * len(entities))(*entities)
    ids = (ctypes.c_uint16 * len(fieldIds))(*fieldIds)
    raw = _call(
        "dcgmEntitiesGetLatestValues",
        _id(dcgmHandle),
        [(p.entityGroupId, p.entityId) for p in pairs],
        list(ids),
        flags,
    )
    values = (dcgm_structs.c_dcgmFieldValue_v2 * (len(fieldIds) * len(entities)))()
    for slot, item in zip(values, raw, strict=True):
        slot.version = dcgm_structs.dcgmFieldValue_version2
        slot.entityGroupId = item["entityGroupId"]
        slot.entityId = item["entityId"]
        slot.fieldId = item["fieldId"]
        slot.fieldType = ord(item["fieldType"])
        slot.status = item["status"]
        if item["fieldType"] == dcgm_fields.DCGM_FT_DOUBLE:
            slot.value.dbl = item["value"]
        elif item["fieldType"] == dcgm_fields.DCGM_FT_STRING:
            slot.value.str = item["value"]
        else:
            slot.value.i64 = item["value"]
    return values
