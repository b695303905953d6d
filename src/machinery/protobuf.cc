#include "machinery/protobuf.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

#include "core/strings.h"
#include "fmt/format.h"

namespace klutch::machinery {
namespace {

// ---------------------------------------------------------------------------------------------
// Message tables.
//
// Each supported protobuf message is a list of fields. A field maps a protobuf field number to
// the JSON name of the Go struct field and says how to convert the wire value. Field numbers,
// names and types come from Kubernetes' generated.proto files (k8s.io/api/<group>/<version>
// and k8s.io/apimachinery/pkg/apis/meta/v1); pointer-ness (kPtr) comes from the Go types.
// To support a new kind: add its messages below and a row to the kind table after them.
// ---------------------------------------------------------------------------------------------

enum class Kind : uint8_t {
  kString,       // length-delimited UTF-8 -> JSON string
  kBytes,        // length-delimited -> standard base64 string
  kBool,         // varint -> true/false
  kInt32,        // varint (negative values sign-extended to 64 bits) -> number
  kInt64,        // varint -> number
  kMessage,      // length-delimited nested message described by its own table
  kTime,         // meta/v1 Time {1 seconds, 2 nanos} -> RFC 3339, whole seconds
  kMicroTime,    // meta/v1 MicroTime {1 seconds, 2 nanos} -> RFC 3339, 6 fractional digits
  kQuantity,     // api/resource Quantity {1 string} -> string
  kIntOrString,  // util/intstr IntOrString {1 type, 2 intVal, 3 strVal} -> number or string
  kFieldsV1,     // meta/v1 FieldsV1 {1 Raw: JSON bytes} -> that JSON object
  kStringList,   // ExtraValue {repeated string items = 1} -> JSON array of strings
};

enum Flag : uint8_t {
  kRepeated = 1 << 0,  // repeated field -> JSON array
  kMap = 1 << 1,       // map<string, kind>: repeated entries {1: key, 2: value} -> JSON object
  kPtr = 1 << 2,       // Go pointer field: a zero value on the wire is kept, not omitted
  kAlways = 1 << 3,    // Go field without omitempty whose emptiness matters: emitted even when
                       // absent ("" or [])
  kInline = 1 << 4,    // embedded Go struct (`json:",inline"`): its fields join the parent object
};

struct FieldSpec {
  uint32_t number;
  std::string_view json_name;
  Kind kind;
  uint8_t flags;
  std::string_view message;  // the nested message type for Kind::kMessage
};

struct MessageSpec {
  std::string_view name;
  std::vector<FieldSpec> fields;
};

// Terse constructors so the tables read like the .proto files they transcribe.
constexpr FieldSpec Str(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kString, flags, {}};
}
constexpr FieldSpec Strs(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kString, static_cast<uint8_t>(flags | kRepeated), {}};
}
constexpr FieldSpec Bool(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kBool, flags, {}};
}
constexpr FieldSpec Int32(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kInt32, flags, {}};
}
constexpr FieldSpec Int32s(uint32_t n, std::string_view json) {
  return {n, json, Kind::kInt32, kRepeated, {}};
}
constexpr FieldSpec Int64(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kInt64, flags, {}};
}
constexpr FieldSpec Int64s(uint32_t n, std::string_view json) {
  return {n, json, Kind::kInt64, kRepeated, {}};
}
constexpr FieldSpec Msg(uint32_t n, std::string_view json, std::string_view type) {
  return {n, json, Kind::kMessage, 0, type};
}
constexpr FieldSpec Msgs(uint32_t n, std::string_view json, std::string_view type) {
  return {n, json, Kind::kMessage, kRepeated, type};
}
// An embedded struct; `proto_name` only documents the .proto field name.
constexpr FieldSpec Inline(uint32_t n, std::string_view proto_name, std::string_view type) {
  return {n, proto_name, Kind::kMessage, kInline, type};
}
constexpr FieldSpec Time(uint32_t n, std::string_view json) {
  return {n, json, Kind::kTime, 0, {}};
}
constexpr FieldSpec MicroTime(uint32_t n, std::string_view json) {
  return {n, json, Kind::kMicroTime, 0, {}};
}
constexpr FieldSpec Quantity(uint32_t n, std::string_view json) {
  return {n, json, Kind::kQuantity, 0, {}};
}
constexpr FieldSpec IntOrString(uint32_t n, std::string_view json, uint8_t flags = 0) {
  return {n, json, Kind::kIntOrString, flags, {}};
}
constexpr FieldSpec FieldsV1(uint32_t n, std::string_view json) {
  return {n, json, Kind::kFieldsV1, 0, {}};
}
constexpr FieldSpec StrMap(uint32_t n, std::string_view json) {
  return {n, json, Kind::kString, kMap, {}};
}
constexpr FieldSpec BytesMap(uint32_t n, std::string_view json) {
  return {n, json, Kind::kBytes, kMap, {}};
}
constexpr FieldSpec QuantityMap(uint32_t n, std::string_view json) {
  return {n, json, Kind::kQuantity, kMap, {}};
}
constexpr FieldSpec ExtraMap(uint32_t n, std::string_view json) {
  return {n, json, Kind::kStringList, kMap, {}};
}

const std::vector<MessageSpec>& MessageSpecs() {
  static const std::vector<MessageSpec> specs{
      // ---- k8s.io/apimachinery/pkg/apis/meta/v1 ----
      {"ObjectMeta",
       {Str(1, "name"), Str(2, "generateName"), Str(3, "namespace"), Str(4, "selfLink"),
        Str(5, "uid"), Str(6, "resourceVersion"), Int64(7, "generation"),
        Time(8, "creationTimestamp"), Time(9, "deletionTimestamp"),
        Int64(10, "deletionGracePeriodSeconds", kPtr), StrMap(11, "labels"),
        StrMap(12, "annotations"), Msgs(13, "ownerReferences", "OwnerReference"),
        Strs(14, "finalizers"), Msgs(17, "managedFields", "ManagedFieldsEntry")}},
      {"OwnerReference",
       {Str(5, "apiVersion"), Str(1, "kind"), Str(3, "name"), Str(4, "uid"),
        Bool(6, "controller", kPtr), Bool(7, "blockOwnerDeletion", kPtr)}},
      {"ManagedFieldsEntry",
       {Str(1, "manager"), Str(2, "operation"), Str(3, "apiVersion"), Time(4, "time"),
        Str(6, "fieldsType"), FieldsV1(7, "fieldsV1"), Str(8, "subresource")}},
      {"LabelSelector",
       {StrMap(1, "matchLabels"), Msgs(2, "matchExpressions", "LabelSelectorRequirement")}},
      {"LabelSelectorRequirement", {Str(1, "key"), Str(2, "operator"), Strs(3, "values")}},
      {"Condition",
       {Str(1, "type"), Str(2, "status"), Int64(3, "observedGeneration"),
        Time(4, "lastTransitionTime"), Str(5, "reason"), Str(6, "message")}},
      {"DeleteOptions",
       {Int64(1, "gracePeriodSeconds", kPtr), Msg(2, "preconditions", "Preconditions"),
        Bool(3, "orphanDependents", kPtr), Str(4, "propagationPolicy", kPtr), Strs(5, "dryRun"),
        Bool(6, "ignoreStoreReadErrorWithClusterBreakingPotential", kPtr)}},
      {"Preconditions", {Str(1, "uid", kPtr), Str(2, "resourceVersion", kPtr)}},

      // ---- k8s.io/api/core/v1: namespaces, config, identities ----
      {"Namespace",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "NamespaceSpec"),
        Msg(3, "status", "NamespaceStatus")}},
      {"NamespaceSpec", {Strs(1, "finalizers")}},
      {"NamespaceStatus", {Str(1, "phase"), Msgs(2, "conditions", "NamespaceCondition")}},
      {"NamespaceCondition",
       {Str(1, "type"), Str(2, "status"), Time(4, "lastTransitionTime"), Str(5, "reason"),
        Str(6, "message")}},
      {"ConfigMap",
       {Msg(1, "metadata", "ObjectMeta"), Bool(4, "immutable", kPtr), StrMap(2, "data"),
        BytesMap(3, "binaryData")}},
      {"Secret",
       {Msg(1, "metadata", "ObjectMeta"), Bool(5, "immutable", kPtr), BytesMap(2, "data"),
        StrMap(4, "stringData"), Str(3, "type")}},
      {"ServiceAccount",
       {Msg(1, "metadata", "ObjectMeta"), Msgs(2, "secrets", "ObjectReference"),
        Msgs(3, "imagePullSecrets", "LocalObjectReference"),
        Bool(4, "automountServiceAccountToken", kPtr)}},
      {"ObjectReference",
       {Str(1, "kind"), Str(2, "namespace"), Str(3, "name"), Str(4, "uid"), Str(5, "apiVersion"),
        Str(6, "resourceVersion"), Str(7, "fieldPath")}},
      {"LocalObjectReference", {Str(1, "name")}},

      // ---- core/v1 Event ----
      {"Event",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "involvedObject", "ObjectReference"),
        Str(3, "reason"), Str(4, "message"), Msg(5, "source", "EventSource"),
        Time(6, "firstTimestamp"), Time(7, "lastTimestamp"), Int32(8, "count"), Str(9, "type"),
        MicroTime(10, "eventTime"), Msg(11, "series", "EventSeries"), Str(12, "action"),
        Msg(13, "related", "ObjectReference"), Str(14, "reportingComponent"),
        Str(15, "reportingInstance")}},
      {"EventSource", {Str(1, "component"), Str(2, "host")}},
      // Shared by core/v1 and events.k8s.io/v1 (same fields and numbers).
      {"EventSeries", {Int32(1, "count"), MicroTime(2, "lastObservedTime")}},

      // ---- core/v1 Service ----
      {"Service",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "ServiceSpec"),
        Msg(3, "status", "ServiceStatus")}},
      {"ServiceSpec",
       {Msgs(1, "ports", "ServicePort"),
        StrMap(2, "selector"),
        Str(3, "clusterIP"),
        Strs(18, "clusterIPs"),
        Str(4, "type"),
        Strs(5, "externalIPs"),
        Str(7, "sessionAffinity"),
        Str(8, "loadBalancerIP"),
        Strs(9, "loadBalancerSourceRanges"),
        Str(10, "externalName"),
        Str(11, "externalTrafficPolicy"),
        Int32(12, "healthCheckNodePort"),
        Bool(13, "publishNotReadyAddresses"),
        Msg(14, "sessionAffinityConfig", "SessionAffinityConfig"),
        Strs(19, "ipFamilies"),
        Str(17, "ipFamilyPolicy", kPtr),
        Bool(20, "allocateLoadBalancerNodePorts", kPtr),
        Str(21, "loadBalancerClass", kPtr),
        Str(22, "internalTrafficPolicy", kPtr),
        Str(23, "trafficDistribution", kPtr)}},
      {"ServicePort",
       {Str(1, "name"), Str(2, "protocol"), Str(6, "appProtocol", kPtr), Int32(3, "port"),
        IntOrString(4, "targetPort"), Int32(5, "nodePort")}},
      {"SessionAffinityConfig", {Msg(1, "clientIP", "ClientIPConfig")}},
      {"ClientIPConfig", {Int32(1, "timeoutSeconds", kPtr)}},
      {"ServiceStatus",
       {Msg(1, "loadBalancer", "LoadBalancerStatus"), Msgs(2, "conditions", "Condition")}},
      {"LoadBalancerStatus", {Msgs(1, "ingress", "LoadBalancerIngress")}},
      {"LoadBalancerIngress",
       {Str(1, "ip"), Str(2, "hostname"), Str(3, "ipMode", kPtr), Msgs(4, "ports", "PortStatus")}},
      {"PortStatus", {Int32(1, "port"), Str(2, "protocol"), Str(3, "error", kPtr)}},

      // ---- core/v1 pod template (as used by apps/v1 Deployment) ----
      {"PodTemplateSpec", {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "PodSpec")}},
      // Not modelled: 34 ephemeralContainers (cannot be set on create or update of a pod spec).
      {"PodSpec",
       {Msgs(1, "volumes", "Volume"),
        Msgs(20, "initContainers", "Container"),
        Msgs(2, "containers", "Container"),
        Str(3, "restartPolicy"),
        Int64(4, "terminationGracePeriodSeconds", kPtr),
        Int64(5, "activeDeadlineSeconds", kPtr),
        Str(6, "dnsPolicy"),
        StrMap(7, "nodeSelector"),
        Str(8, "serviceAccountName"),
        Str(9, "serviceAccount"),
        Bool(21, "automountServiceAccountToken", kPtr),
        Str(10, "nodeName"),
        Bool(11, "hostNetwork"),
        Bool(12, "hostPID"),
        Bool(13, "hostIPC"),
        Bool(27, "shareProcessNamespace", kPtr),
        Msg(14, "securityContext", "PodSecurityContext"),
        Msgs(15, "imagePullSecrets", "LocalObjectReference"),
        Str(16, "hostname"),
        Str(17, "subdomain"),
        Msg(18, "affinity", "Affinity"),
        Str(19, "schedulerName"),
        Msgs(22, "tolerations", "Toleration"),
        Msgs(23, "hostAliases", "HostAlias"),
        Str(24, "priorityClassName"),
        Int32(25, "priority", kPtr),
        Msg(26, "dnsConfig", "PodDNSConfig"),
        Msgs(28, "readinessGates", "PodReadinessGate"),
        Str(29, "runtimeClassName", kPtr),
        Bool(30, "enableServiceLinks", kPtr),
        Str(31, "preemptionPolicy", kPtr),
        QuantityMap(32, "overhead"),
        Msgs(33, "topologySpreadConstraints", "TopologySpreadConstraint"),
        Bool(35, "setHostnameAsFQDN", kPtr),
        Msg(36, "os", "PodOS"),
        Bool(37, "hostUsers", kPtr),
        Msgs(38, "schedulingGates", "PodSchedulingGate"),
        Msgs(39, "resourceClaims", "PodResourceClaim"),
        Msg(40, "resources", "ResourceRequirements"),
        Str(41, "hostnameOverride", kPtr),
        Msg(42, "workloadRef", "WorkloadReference")}},
      {"Container",
       {Str(1, "name"),
        Str(2, "image"),
        Strs(3, "command"),
        Strs(4, "args"),
        Str(5, "workingDir"),
        Msgs(6, "ports", "ContainerPort"),
        Msgs(19, "envFrom", "EnvFromSource"),
        Msgs(7, "env", "EnvVar"),
        Msg(8, "resources", "ResourceRequirements"),
        Msgs(23, "resizePolicy", "ContainerResizePolicy"),
        Str(24, "restartPolicy", kPtr),
        Msgs(25, "restartPolicyRules", "ContainerRestartRule"),
        Msgs(9, "volumeMounts", "VolumeMount"),
        Msgs(21, "volumeDevices", "VolumeDevice"),
        Msg(10, "livenessProbe", "Probe"),
        Msg(11, "readinessProbe", "Probe"),
        Msg(22, "startupProbe", "Probe"),
        Msg(12, "lifecycle", "Lifecycle"),
        Str(13, "terminationMessagePath"),
        Str(20, "terminationMessagePolicy"),
        Str(14, "imagePullPolicy"),
        Msg(15, "securityContext", "SecurityContext"),
        Bool(16, "stdin"),
        Bool(17, "stdinOnce"),
        Bool(18, "tty")}},
      {"ContainerPort",
       {Str(1, "name"), Int32(2, "hostPort"), Int32(3, "containerPort"), Str(4, "protocol"),
        Str(5, "hostIP")}},
      {"ContainerResizePolicy", {Str(1, "resourceName"), Str(2, "restartPolicy")}},
      {"ContainerRestartRule",
       {Str(1, "action"), Msg(2, "exitCodes", "ContainerRestartRuleOnExitCodes")}},
      {"ContainerRestartRuleOnExitCodes", {Str(1, "operator"), Int32s(2, "values")}},
      {"EnvFromSource",
       {Str(1, "prefix"), Msg(2, "configMapRef", "ConfigMapEnvSource"),
        Msg(3, "secretRef", "SecretEnvSource")}},
      {"ConfigMapEnvSource",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Bool(2, "optional", kPtr)}},
      {"SecretEnvSource",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Bool(2, "optional", kPtr)}},
      {"EnvVar", {Str(1, "name"), Str(2, "value"), Msg(3, "valueFrom", "EnvVarSource")}},
      {"EnvVarSource",
       {Msg(1, "fieldRef", "ObjectFieldSelector"),
        Msg(2, "resourceFieldRef", "ResourceFieldSelector"),
        Msg(3, "configMapKeyRef", "ConfigMapKeySelector"),
        Msg(4, "secretKeyRef", "SecretKeySelector"), Msg(5, "fileKeyRef", "FileKeySelector")}},
      {"ObjectFieldSelector", {Str(1, "apiVersion"), Str(2, "fieldPath")}},
      {"ResourceFieldSelector",
       {Str(1, "containerName"), Str(2, "resource"), Quantity(3, "divisor")}},
      {"ConfigMapKeySelector",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Str(2, "key"),
        Bool(3, "optional", kPtr)}},
      {"SecretKeySelector",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Str(2, "key"),
        Bool(3, "optional", kPtr)}},
      {"FileKeySelector",
       {Str(1, "volumeName"), Str(2, "path"), Str(3, "key"), Bool(4, "optional", kPtr)}},
      {"ResourceRequirements",
       {QuantityMap(1, "limits"), QuantityMap(2, "requests"), Msgs(3, "claims", "ResourceClaim")}},
      {"ResourceClaim", {Str(1, "name"), Str(2, "request")}},
      {"VolumeMount",
       {Str(1, "name"), Bool(2, "readOnly"), Str(7, "recursiveReadOnly", kPtr), Str(3, "mountPath"),
        Str(4, "subPath"), Str(5, "mountPropagation", kPtr), Str(6, "subPathExpr")}},
      {"VolumeDevice", {Str(1, "name"), Str(2, "devicePath")}},
      {"Probe",
       {Inline(1, "handler", "ProbeHandler"), Int32(2, "initialDelaySeconds"),
        Int32(3, "timeoutSeconds"), Int32(4, "periodSeconds"), Int32(5, "successThreshold"),
        Int32(6, "failureThreshold"), Int64(7, "terminationGracePeriodSeconds", kPtr)}},
      {"ProbeHandler",
       {Msg(1, "exec", "ExecAction"), Msg(2, "httpGet", "HTTPGetAction"),
        Msg(3, "tcpSocket", "TCPSocketAction"), Msg(4, "grpc", "GRPCAction")}},
      {"ExecAction", {Strs(1, "command")}},
      {"HTTPGetAction",
       {Str(1, "path"), IntOrString(2, "port"), Str(3, "host"), Str(4, "scheme"),
        Msgs(5, "httpHeaders", "HTTPHeader")}},
      {"HTTPHeader", {Str(1, "name"), Str(2, "value")}},
      {"TCPSocketAction", {IntOrString(1, "port"), Str(2, "host")}},
      {"GRPCAction", {Int32(1, "port"), Str(2, "service", kPtr)}},
      {"Lifecycle",
       {Msg(1, "postStart", "LifecycleHandler"), Msg(2, "preStop", "LifecycleHandler"),
        Str(3, "stopSignal", kPtr)}},
      {"LifecycleHandler",
       {Msg(1, "exec", "ExecAction"), Msg(2, "httpGet", "HTTPGetAction"),
        Msg(3, "tcpSocket", "TCPSocketAction"), Msg(4, "sleep", "SleepAction")}},
      {"SleepAction", {Int64(1, "seconds")}},
      {"SecurityContext",
       {Msg(1, "capabilities", "Capabilities"), Bool(2, "privileged", kPtr),
        Msg(3, "seLinuxOptions", "SELinuxOptions"),
        Msg(10, "windowsOptions", "WindowsSecurityContextOptions"), Int64(4, "runAsUser", kPtr),
        Int64(8, "runAsGroup", kPtr), Bool(5, "runAsNonRoot", kPtr),
        Bool(6, "readOnlyRootFilesystem", kPtr), Bool(7, "allowPrivilegeEscalation", kPtr),
        Str(9, "procMount", kPtr), Msg(11, "seccompProfile", "SeccompProfile"),
        Msg(12, "appArmorProfile", "AppArmorProfile"), Msgs(13, "ulimits", "Ulimit")}},
      {"Capabilities", {Strs(1, "add"), Strs(2, "drop")}},
      {"SELinuxOptions", {Str(1, "user"), Str(2, "role"), Str(3, "type"), Str(4, "level")}},
      {"WindowsSecurityContextOptions",
       {Str(1, "gmsaCredentialSpecName", kPtr), Str(2, "gmsaCredentialSpec", kPtr),
        Str(3, "runAsUserName", kPtr), Bool(4, "hostProcess", kPtr)}},
      {"SeccompProfile", {Str(1, "type"), Str(2, "localhostProfile", kPtr)}},
      {"AppArmorProfile", {Str(1, "type"), Str(2, "localhostProfile", kPtr)}},
      {"Ulimit", {Str(1, "name"), Int64(2, "hard"), Int64(3, "soft")}},
      {"PodSecurityContext",
       {Msg(1, "seLinuxOptions", "SELinuxOptions"),
        Msg(8, "windowsOptions", "WindowsSecurityContextOptions"), Int64(2, "runAsUser", kPtr),
        Int64(6, "runAsGroup", kPtr), Bool(3, "runAsNonRoot", kPtr),
        Int64s(4, "supplementalGroups"), Str(12, "supplementalGroupsPolicy", kPtr),
        Int64(5, "fsGroup", kPtr), Msgs(7, "sysctls", "Sysctl"),
        Str(9, "fsGroupChangePolicy", kPtr), Msg(10, "seccompProfile", "SeccompProfile"),
        Msg(11, "appArmorProfile", "AppArmorProfile"), Str(13, "seLinuxChangePolicy", kPtr)}},
      {"Sysctl", {Str(1, "name"), Str(2, "value")}},
      {"Affinity",
       {Msg(1, "nodeAffinity", "NodeAffinity"), Msg(2, "podAffinity", "PodAffinity"),
        Msg(3, "podAntiAffinity", "PodAntiAffinity")}},
      {"NodeAffinity",
       {Msg(1, "requiredDuringSchedulingIgnoredDuringExecution", "NodeSelector"),
        Msgs(2, "preferredDuringSchedulingIgnoredDuringExecution", "PreferredSchedulingTerm")}},
      {"NodeSelector", {Msgs(1, "nodeSelectorTerms", "NodeSelectorTerm")}},
      {"NodeSelectorTerm",
       {Msgs(1, "matchExpressions", "NodeSelectorRequirement"),
        Msgs(2, "matchFields", "NodeSelectorRequirement")}},
      {"NodeSelectorRequirement", {Str(1, "key"), Str(2, "operator"), Strs(3, "values")}},
      {"PreferredSchedulingTerm", {Int32(1, "weight"), Msg(2, "preference", "NodeSelectorTerm")}},
      {"PodAffinity",
       {Msgs(1, "requiredDuringSchedulingIgnoredDuringExecution", "PodAffinityTerm"),
        Msgs(2, "preferredDuringSchedulingIgnoredDuringExecution", "WeightedPodAffinityTerm")}},
      {"PodAntiAffinity",
       {Msgs(1, "requiredDuringSchedulingIgnoredDuringExecution", "PodAffinityTerm"),
        Msgs(2, "preferredDuringSchedulingIgnoredDuringExecution", "WeightedPodAffinityTerm")}},
      {"PodAffinityTerm",
       {Msg(1, "labelSelector", "LabelSelector"), Strs(2, "namespaces"), Str(3, "topologyKey"),
        Msg(4, "namespaceSelector", "LabelSelector"), Strs(5, "matchLabelKeys"),
        Strs(6, "mismatchLabelKeys")}},
      {"WeightedPodAffinityTerm",
       {Int32(1, "weight"), Msg(2, "podAffinityTerm", "PodAffinityTerm")}},
      {"Toleration",
       {Str(1, "key"), Str(2, "operator"), Str(3, "value"), Str(4, "effect"),
        Int64(5, "tolerationSeconds", kPtr)}},
      {"HostAlias", {Str(1, "ip"), Strs(2, "hostnames")}},
      {"PodDNSConfig",
       {Strs(1, "nameservers"), Strs(2, "searches"), Msgs(3, "options", "PodDNSConfigOption")}},
      {"PodDNSConfigOption", {Str(1, "name"), Str(2, "value", kPtr)}},
      {"PodReadinessGate", {Str(1, "conditionType")}},
      {"TopologySpreadConstraint",
       {Int32(1, "maxSkew"), Str(2, "topologyKey"), Str(3, "whenUnsatisfiable"),
        Msg(4, "labelSelector", "LabelSelector"), Int32(5, "minDomains", kPtr),
        Str(6, "nodeAffinityPolicy", kPtr), Str(7, "nodeTaintsPolicy", kPtr),
        Strs(8, "matchLabelKeys")}},
      {"PodOS", {Str(1, "name")}},
      {"PodSchedulingGate", {Str(1, "name")}},
      {"PodResourceClaim",
       {Str(1, "name"), Str(3, "resourceClaimName", kPtr),
        Str(4, "resourceClaimTemplateName", kPtr)}},
      {"WorkloadReference", {Str(1, "name"), Str(2, "podGroup"), Str(3, "podGroupReplicaKey")}},
      {"Volume", {Str(1, "name"), Inline(2, "volumeSource", "VolumeSource")}},
      // Not modelled: the in-tree cloud and legacy sources (3 gcePersistentDisk,
      // 4 awsElasticBlockStore, 5 gitRepo, 8 iscsi, 9 glusterfs, 11 rbd, 12 flexVolume,
      // 13 cinder, 14 cephfs, 15 flocker, 17 fc, 18 azureFile, 20 vsphereVolume, 21 quobyte,
      // 22 azureDisk, 23 photonPersistentDisk, 24 portworxVolume, 25 scaleIO, 27 storageos)
      // and 29 ephemeral.
      {"VolumeSource",
       {Msg(1, "hostPath", "HostPathVolumeSource"), Msg(2, "emptyDir", "EmptyDirVolumeSource"),
        Msg(6, "secret", "SecretVolumeSource"), Msg(7, "nfs", "NFSVolumeSource"),
        Msg(10, "persistentVolumeClaim", "PersistentVolumeClaimVolumeSource"),
        Msg(16, "downwardAPI", "DownwardAPIVolumeSource"),
        Msg(19, "configMap", "ConfigMapVolumeSource"),
        Msg(26, "projected", "ProjectedVolumeSource"), Msg(28, "csi", "CSIVolumeSource"),
        Msg(30, "image", "ImageVolumeSource")}},
      {"HostPathVolumeSource", {Str(1, "path"), Str(2, "type", kPtr)}},
      {"EmptyDirVolumeSource", {Str(1, "medium"), Quantity(2, "sizeLimit")}},
      {"SecretVolumeSource",
       {Str(1, "secretName"), Msgs(2, "items", "KeyToPath"), Int32(3, "defaultMode", kPtr),
        Bool(4, "optional", kPtr)}},
      {"KeyToPath", {Str(1, "key"), Str(2, "path"), Int32(3, "mode", kPtr)}},
      {"NFSVolumeSource", {Str(1, "server"), Str(2, "path"), Bool(3, "readOnly")}},
      {"PersistentVolumeClaimVolumeSource", {Str(1, "claimName"), Bool(2, "readOnly")}},
      {"DownwardAPIVolumeSource",
       {Msgs(1, "items", "DownwardAPIVolumeFile"), Int32(2, "defaultMode", kPtr)}},
      {"DownwardAPIVolumeFile",
       {Str(1, "path"), Msg(2, "fieldRef", "ObjectFieldSelector"),
        Msg(3, "resourceFieldRef", "ResourceFieldSelector"), Int32(4, "mode", kPtr)}},
      {"ConfigMapVolumeSource",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Msgs(2, "items", "KeyToPath"),
        Int32(3, "defaultMode", kPtr), Bool(4, "optional", kPtr)}},
      {"ProjectedVolumeSource",
       {Msgs(1, "sources", "VolumeProjection"), Int32(2, "defaultMode", kPtr)}},
      // Not modelled: 6 podCertificate (alpha).
      {"VolumeProjection",
       {Msg(1, "secret", "SecretProjection"), Msg(2, "downwardAPI", "DownwardAPIProjection"),
        Msg(3, "configMap", "ConfigMapProjection"),
        Msg(4, "serviceAccountToken", "ServiceAccountTokenProjection"),
        Msg(5, "clusterTrustBundle", "ClusterTrustBundleProjection")}},
      {"SecretProjection",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Msgs(2, "items", "KeyToPath"),
        Bool(4, "optional", kPtr)}},
      {"ConfigMapProjection",
       {Inline(1, "localObjectReference", "LocalObjectReference"), Msgs(2, "items", "KeyToPath"),
        Bool(4, "optional", kPtr)}},
      {"DownwardAPIProjection", {Msgs(1, "items", "DownwardAPIVolumeFile")}},
      {"ServiceAccountTokenProjection",
       {Str(1, "audience"), Int64(2, "expirationSeconds", kPtr), Str(3, "path")}},
      {"ClusterTrustBundleProjection",
       {Str(1, "name", kPtr), Str(2, "signerName", kPtr), Msg(3, "labelSelector", "LabelSelector"),
        Bool(5, "optional", kPtr), Str(4, "path")}},
      {"CSIVolumeSource",
       {Str(1, "driver"), Bool(2, "readOnly", kPtr), Str(3, "fsType", kPtr),
        StrMap(4, "volumeAttributes"), Msg(5, "nodePublishSecretRef", "LocalObjectReference")}},
      {"ImageVolumeSource", {Str(1, "reference"), Str(2, "pullPolicy")}},

      // ---- apps/v1 ----
      {"Deployment",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "DeploymentSpec"),
        Msg(3, "status", "DeploymentStatus")}},
      {"DeploymentSpec",
       {Int32(1, "replicas", kPtr), Msg(2, "selector", "LabelSelector"),
        Msg(3, "template", "PodTemplateSpec"), Msg(4, "strategy", "DeploymentStrategy"),
        Int32(5, "minReadySeconds"), Int32(6, "revisionHistoryLimit", kPtr), Bool(7, "paused"),
        Int32(9, "progressDeadlineSeconds", kPtr), Str(10, "podReplacementPolicy", kPtr)}},
      {"DeploymentStrategy", {Str(1, "type"), Msg(2, "rollingUpdate", "RollingUpdateDeployment")}},
      {"RollingUpdateDeployment",
       {IntOrString(1, "maxUnavailable", kPtr), IntOrString(2, "maxSurge", kPtr)}},
      {"DeploymentStatus",
       {Int64(1, "observedGeneration"), Int32(2, "replicas"), Int32(3, "updatedReplicas"),
        Int32(7, "readyReplicas"), Int32(4, "availableReplicas"), Int32(5, "unavailableReplicas"),
        Int32(9, "terminatingReplicas", kPtr), Msgs(6, "conditions", "DeploymentCondition"),
        Int32(8, "collisionCount", kPtr)}},
      {"DeploymentCondition",
       {Str(1, "type"), Str(2, "status"), Time(6, "lastUpdateTime"), Time(7, "lastTransitionTime"),
        Str(4, "reason"), Str(5, "message")}},

      // ---- coordination.k8s.io/v1 ----
      {"Lease", {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "LeaseSpec")}},
      {"LeaseSpec",
       {Str(1, "holderIdentity", kPtr), Int32(2, "leaseDurationSeconds", kPtr),
        MicroTime(3, "acquireTime"), MicroTime(4, "renewTime"), Int32(5, "leaseTransitions", kPtr),
        Str(6, "strategy", kPtr), Str(7, "preferredHolder", kPtr)}},

      // ---- events.k8s.io/v1 ----
      {"events.k8s.io/v1.Event",
       {Msg(1, "metadata", "ObjectMeta"), MicroTime(2, "eventTime"),
        Msg(3, "series", "EventSeries"), Str(4, "reportingController"), Str(5, "reportingInstance"),
        Str(6, "action"), Str(7, "reason"), Msg(8, "regarding", "ObjectReference"),
        Msg(9, "related", "ObjectReference"), Str(10, "note"), Str(11, "type"),
        Msg(12, "deprecatedSource", "EventSource"), Time(13, "deprecatedFirstTimestamp"),
        Time(14, "deprecatedLastTimestamp"), Int32(15, "deprecatedCount")}},

      // ---- rbac.authorization.k8s.io/v1 ----
      {"Role", {Msg(1, "metadata", "ObjectMeta"), Msgs(2, "rules", "PolicyRule")}},
      {"ClusterRole",
       {Msg(1, "metadata", "ObjectMeta"), Msgs(2, "rules", "PolicyRule"),
        Msg(3, "aggregationRule", "AggregationRule")}},
      {"AggregationRule", {Msgs(1, "clusterRoleSelectors", "LabelSelector")}},
      {"PolicyRule",
       {Strs(1, "verbs", kAlways), Strs(2, "apiGroups"), Strs(3, "resources"),
        Strs(4, "resourceNames"), Strs(5, "nonResourceURLs")}},
      {"RoleBinding",
       {Msg(1, "metadata", "ObjectMeta"), Msgs(2, "subjects", "Subject"),
        Msg(3, "roleRef", "RoleRef")}},
      {"ClusterRoleBinding",
       {Msg(1, "metadata", "ObjectMeta"), Msgs(2, "subjects", "Subject"),
        Msg(3, "roleRef", "RoleRef")}},
      {"Subject", {Str(1, "kind"), Str(2, "apiGroup", kPtr), Str(3, "name"), Str(4, "namespace")}},
      {"RoleRef", {Str(1, "apiGroup", kAlways), Str(2, "kind", kAlways), Str(3, "name", kAlways)}},

      // ---- authentication.k8s.io/v1 ----
      {"TokenRequest",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "TokenRequestSpec"),
        Msg(3, "status", "TokenRequestStatus")}},
      {"TokenRequestSpec",
       {Strs(1, "audiences"), Int64(4, "expirationSeconds", kPtr),
        Msg(3, "boundObjectRef", "BoundObjectReference")}},
      // The .proto names fields 2 and 4 "aPIVersion" and "uID"; JSON says apiVersion and uid.
      {"BoundObjectReference",
       {Str(1, "kind"), Str(2, "apiVersion"), Str(3, "name"), Str(4, "uid")}},
      {"TokenRequestStatus", {Str(1, "token"), Time(2, "expirationTimestamp")}},
      {"TokenReview",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "TokenReviewSpec"),
        Msg(3, "status", "TokenReviewStatus")}},
      {"TokenReviewSpec", {Str(1, "token"), Strs(2, "audiences")}},
      {"TokenReviewStatus",
       {Bool(1, "authenticated"), Msg(2, "user", "UserInfo"), Strs(4, "audiences"),
        Str(3, "error")}},
      {"UserInfo", {Str(1, "username"), Str(2, "uid"), Strs(3, "groups"), ExtraMap(4, "extra")}},
      {"SelfSubjectReview",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "status", "SelfSubjectReviewStatus")}},
      {"SelfSubjectReviewStatus", {Msg(1, "userInfo", "UserInfo")}},

      // ---- authorization.k8s.io/v1 ----
      {"SelfSubjectAccessReview",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "SelfSubjectAccessReviewSpec"),
        Msg(3, "status", "SubjectAccessReviewStatus")}},
      {"SelfSubjectAccessReviewSpec",
       {Msg(1, "resourceAttributes", "ResourceAttributes"),
        Msg(2, "nonResourceAttributes", "NonResourceAttributes")}},
      {"SubjectAccessReview",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "SubjectAccessReviewSpec"),
        Msg(3, "status", "SubjectAccessReviewStatus")}},
      {"SubjectAccessReviewSpec",
       {Msg(1, "resourceAttributes", "ResourceAttributes"),
        Msg(2, "nonResourceAttributes", "NonResourceAttributes"), Str(3, "user"), Strs(4, "groups"),
        ExtraMap(5, "extra"), Str(6, "uid")}},
      {"ResourceAttributes",
       {Str(1, "namespace"), Str(2, "verb"), Str(3, "group"), Str(4, "version"), Str(5, "resource"),
        Str(6, "subresource"), Str(7, "name"), Msg(8, "fieldSelector", "FieldSelectorAttributes"),
        Msg(9, "labelSelector", "LabelSelectorAttributes")}},
      {"FieldSelectorAttributes",
       {Str(1, "rawSelector"), Msgs(2, "requirements", "FieldSelectorRequirement")}},
      {"FieldSelectorRequirement", {Str(1, "key"), Str(2, "operator"), Strs(3, "values")}},
      {"LabelSelectorAttributes",
       {Str(1, "rawSelector"), Msgs(2, "requirements", "LabelSelectorRequirement")}},
      {"NonResourceAttributes", {Str(1, "path"), Str(2, "verb")}},
      {"SubjectAccessReviewStatus",
       {Bool(1, "allowed"), Bool(4, "denied"), Str(2, "reason"), Str(3, "evaluationError")}},
      {"SelfSubjectRulesReview",
       {Msg(1, "metadata", "ObjectMeta"), Msg(2, "spec", "SelfSubjectRulesReviewSpec"),
        Msg(3, "status", "SubjectRulesReviewStatus")}},
      {"SelfSubjectRulesReviewSpec", {Str(1, "namespace")}},
      {"SubjectRulesReviewStatus",
       {Msgs(1, "resourceRules", "ResourceRule"), Msgs(2, "nonResourceRules", "NonResourceRule"),
        Bool(3, "incomplete"), Str(4, "evaluationError")}},
      {"ResourceRule",
       {Strs(1, "verbs"), Strs(2, "apiGroups"), Strs(3, "resources"), Strs(4, "resourceNames")}},
      {"NonResourceRule", {Strs(1, "verbs"), Strs(2, "nonResourceURLs")}},
  };
  return specs;
}

// Top-level kinds: (apiVersion, kind) -> message. "*" matches any apiVersion.
struct KindSpec {
  std::string_view api_version;
  std::string_view kind;
  std::string_view message;
};

constexpr KindSpec kKinds[] = {
    {"v1", "Namespace", "Namespace"},
    {"v1", "ConfigMap", "ConfigMap"},
    {"v1", "Secret", "Secret"},
    {"v1", "ServiceAccount", "ServiceAccount"},
    {"v1", "Event", "Event"},
    {"v1", "Service", "Service"},
    {"apps/v1", "Deployment", "Deployment"},
    {"coordination.k8s.io/v1", "Lease", "Lease"},
    {"events.k8s.io/v1", "Event", "events.k8s.io/v1.Event"},
    {"rbac.authorization.k8s.io/v1", "Role", "Role"},
    {"rbac.authorization.k8s.io/v1", "ClusterRole", "ClusterRole"},
    {"rbac.authorization.k8s.io/v1", "RoleBinding", "RoleBinding"},
    {"rbac.authorization.k8s.io/v1", "ClusterRoleBinding", "ClusterRoleBinding"},
    {"authentication.k8s.io/v1", "TokenRequest", "TokenRequest"},
    {"authentication.k8s.io/v1", "TokenReview", "TokenReview"},
    {"authentication.k8s.io/v1", "SelfSubjectReview", "SelfSubjectReview"},
    {"authorization.k8s.io/v1", "SelfSubjectAccessReview", "SelfSubjectAccessReview"},
    {"authorization.k8s.io/v1", "SelfSubjectRulesReview", "SelfSubjectRulesReview"},
    {"authorization.k8s.io/v1", "SubjectAccessReview", "SubjectAccessReview"},
    {"authorization.k8s.io/v1", "LocalSubjectAccessReview", "SubjectAccessReview"},
    // metav1.AddToGroupVersion registers DeleteOptions in every group version and client-go
    // stamps the one of the sending client ("v1", "apps/v1", ..., or "meta.k8s.io/v1").
    {"*", "DeleteOptions", "DeleteOptions"},
};

// ---------------------------------------------------------------------------------------------
// Resolved tables: message names turned into pointers, fields sorted by number.
// ---------------------------------------------------------------------------------------------

struct Message;

struct Field {
  const FieldSpec* spec;
  const Message* message;  // resolved FieldSpec::message, or nullptr
};

struct Message {
  std::string_view name;
  std::vector<Field> fields;  // sorted by number

  const Field* Find(uint32_t number) const {
    auto it = std::lower_bound(fields.begin(), fields.end(), number,
                               [](const Field& f, uint32_t n) { return f.spec->number < n; });
    return it != fields.end() && it->spec->number == number ? &*it : nullptr;
  }
};

class Registry {
 public:
  static const Registry& Get() {
    static const Registry registry;
    return registry;
  }

  const Message* FindKind(std::string_view api_version, std::string_view kind) const {
    for (const KindSpec& k : kKinds) {
      if (k.kind == kind && (k.api_version == "*" || k.api_version == api_version)) {
        return &messages_.at(k.message);
      }
    }
    return nullptr;
  }

 private:
  // Table mistakes are programmer errors: they abort at first use (every test decodes).
  Registry() {
    for (const MessageSpec& spec : MessageSpecs()) {
      KLUTCH_CHECK(messages_.emplace(spec.name, Message{spec.name, {}}).second);
    }
    for (const MessageSpec& spec : MessageSpecs()) {
      Message& message = messages_.at(spec.name);
      for (const FieldSpec& f : spec.fields) {
        const Message* nested = nullptr;
        if (f.kind == Kind::kMessage) {
          auto it = messages_.find(f.message);
          KLUTCH_CHECK(it != messages_.end());
          KLUTCH_CHECK((f.flags & kMap) == 0);
          nested = &it->second;
        }
        KLUTCH_CHECK(f.number > 0 && !f.json_name.empty());
        KLUTCH_CHECK((f.flags & kInline) == 0 || f.kind == Kind::kMessage);
        KLUTCH_CHECK((f.flags & kAlways) == 0 || (f.flags & kRepeated) != 0 ||
                     f.kind == Kind::kString);
        message.fields.push_back(Field{&f, nested});
      }
      std::sort(message.fields.begin(), message.fields.end(),
                [](const Field& a, const Field& b) { return a.spec->number < b.spec->number; });
      for (size_t i = 1; i < message.fields.size(); ++i) {
        KLUTCH_CHECK(message.fields[i - 1].spec->number != message.fields[i].spec->number);
      }
    }
    for (const KindSpec& k : kKinds) KLUTCH_CHECK(messages_.count(k.message) == 1);
  }

  // Node-based: pointers to values stay valid while the map is filled.
  std::unordered_map<std::string_view, Message> messages_;
};

// ---------------------------------------------------------------------------------------------
// Wire reading.
// ---------------------------------------------------------------------------------------------

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireLen = 2;
constexpr uint32_t kMaxFieldNumber = (1u << 29) - 1;
constexpr std::string_view kMagic("k8s\0", 4);

std::string_view WireTypeName(uint32_t wire) {
  switch (wire) {
    case 0:
      return "varint";
    case 1:
      return "64-bit";
    case 2:
      return "length-delimited";
    case 3:
      return "start-group";
    case 4:
      return "end-group";
    case 5:
      return "32-bit";
    default:
      return "invalid";
  }
}

// One field occurrence as read from the wire.
struct WireValue {
  uint32_t wire = 0;
  uint64_t varint = 0;     // wire type 0
  std::string_view bytes;  // wire type 2
};

class WireReader {
 public:
  explicit WireReader(std::string_view data) : data_(data) {}

  bool done() const { return pos_ >= data_.size(); }

  // A base-128 varint of at most 10 bytes that fits in 64 bits.
  bool ReadVarint(uint64_t& out) {
    uint64_t value = 0;
    for (int i = 0; i < 10; ++i) {
      if (pos_ >= data_.size()) return false;
      auto byte = static_cast<uint8_t>(data_[pos_++]);
      if (i == 9 && byte > 1) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
      if ((byte & 0x80) == 0) {
        out = value;
        return true;
      }
    }
    return false;
  }

  // Reads a key and the value that follows it. A problem is returned as text for the caller to
  // put in context; `number` is set as soon as the key is read (0 before). Only varint and
  // length-delimited values occur in Kubernetes messages; the other wire types are read (to
  // report the field they belong to) but not interpreted.
  std::string Next(uint32_t& number, WireValue& value) {
    number = 0;
    uint64_t key = 0;
    if (!ReadVarint(key)) return "malformed or truncated varint in field key";
    if ((key >> 3) == 0 || (key >> 3) > kMaxFieldNumber) {
      return fmt::format("invalid field number {}", key >> 3);
    }
    number = static_cast<uint32_t>(key >> 3);
    value = WireValue{static_cast<uint32_t>(key & 7), 0, {}};
    switch (value.wire) {
      case 0:
        if (!ReadVarint(value.varint)) return "malformed or truncated varint";
        return "";
      case 1:
      case 5: {
        size_t size = value.wire == 1 ? 8 : 4;
        if (data_.size() - pos_ < size) return "truncated fixed-size value";
        pos_ += size;
        return "";
      }
      case 2: {
        uint64_t length = 0;
        if (!ReadVarint(length)) return "malformed or truncated length";
        if (length > data_.size() - pos_) {
          return fmt::format("truncated length-delimited value (declares {} bytes, {} remain)",
                             length, data_.size() - pos_);
        }
        value.bytes = data_.substr(pos_, static_cast<size_t>(length));
        pos_ += static_cast<size_t>(length);
        return "";
      }
      default:
        return fmt::format("unsupported wire type {} ({})", value.wire, WireTypeName(value.wire));
    }
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Value conversions.
// ---------------------------------------------------------------------------------------------

bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      len = 2;
      cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      len = 3;
      cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<uint8_t>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += len;
  }
  return true;
}

// Largest bracket nesting of a JSON text, ignoring brackets inside strings.
int JsonNesting(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      max_depth = std::max(max_depth, ++depth);
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return max_depth;
}

// Bounds of Go's time.Time that RFC 3339 can express: 0001-01-01T00:00:00Z (also Go's zero
// time) to 9999-12-31T23:59:59Z.
constexpr int64_t kMinRfc3339Seconds = -62135596800;
constexpr int64_t kMaxRfc3339Seconds = 253402300799;
// Deeper FieldsV1 JSON is refused so that later recursive walks cannot exhaust the stack.
constexpr int kMaxFieldsV1Nesting = 100;

std::string FormatRfc3339(int64_t seconds, int32_t nanos, bool micro) {
  using std::chrono::days;
  using std::chrono::sys_days;
  int64_t day = seconds / 86400;
  int64_t second_of_day = seconds % 86400;
  if (second_of_day < 0) {
    second_of_day += 86400;
    --day;
  }
  std::chrono::year_month_day date{sys_days{days{day}}};
  std::string out =
      fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", static_cast<int>(date.year()),
                  static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                  second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
  if (micro) out += fmt::format(".{:06}", nanos / 1000);
  out += 'Z';
  return out;
}

std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 100;
  std::string shown(s.substr(0, kMaxShown));
  if (s.size() > kMaxShown) shown += "...";
  return Json(shown).dump(-1, ' ', false, Json::error_handler_t::replace);
}

// ---------------------------------------------------------------------------------------------
// The decoder.
// ---------------------------------------------------------------------------------------------

// Appends ".name" (or "[i]") to the error path for the lifetime of the scope.
class PathScope {
 public:
  PathScope(std::string& path, std::string_view name) : path_(path), size_(path.size()) {
    if (name.empty()) return;
    if (!path_.empty()) path_ += '.';
    path_.append(name);
  }
  PathScope(std::string& path, size_t index) : path_(path), size_(path.size()) {
    path_ += fmt::format("[{}]", index);
  }
  ~PathScope() { path_.resize(size_); }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;

 private:
  std::string& path_;
  size_t size_;
};

bool IsVarintKind(Kind kind) {
  return kind == Kind::kBool || kind == Kind::kInt32 || kind == Kind::kInt64;
}

// Decodes one object message into JSON. Holds the error path while descending.
class Decoder {
 public:
  Decoder(std::string type_name, int max_depth)
      : type_name_(std::move(type_name)), max_depth_(max_depth) {}

  core::Status DecodeObject(std::string_view data, const Message& message, Json& out) {
    return DecodeMessage(data, message, out, 1);
  }

  core::Status Error(std::string_view what) const {
    if (path_.empty()) return core::BadRequest(fmt::format("protobuf {}: {}", type_name_, what));
    return core::BadRequest(fmt::format("protobuf {}: {}: {}", type_name_, path_, what));
  }

 private:
  // Calls fn(number, value) for every field of `data`; the first error stops the walk. A wire
  // problem is reported at the path of the field it occurred in when `message` names it.
  template <typename Fn>
  core::Status ForEachField(std::string_view data, Fn&& fn, const Message* message = nullptr) {
    WireReader reader(data);
    while (!reader.done()) {
      uint32_t number = 0;
      WireValue value;
      std::string problem = reader.Next(number, value);
      if (!problem.empty()) {
        if (number == 0) return Error(problem);
        const Field* field = message != nullptr ? message->Find(number) : nullptr;
        if (field == nullptr || (field->spec->flags & kInline) != 0) {
          return Error(fmt::format("field {}: {}", number, problem));
        }
        PathScope scope(path_, field->spec->json_name);
        return Error(problem);
      }
      KLUTCH_RETURN_IF_ERROR(fn(number, value));
    }
    return core::Status::Ok();
  }

  core::Status UnknownField(std::string_view message, uint32_t number, uint32_t wire) const {
    return Error(fmt::format("unknown field number {} ({}) in message {}", number,
                             WireTypeName(wire), message));
  }

  core::Status ExpectWire(const WireValue& value, uint32_t want, std::string_view what) const {
    if (value.wire == want) return core::Status::Ok();
    return Error(fmt::format("wrong wire type {} ({}) for {} field, want {} ({})", value.wire,
                             WireTypeName(value.wire), what, want, WireTypeName(want)));
  }

  core::Status EnterMessage(int depth) const {
    if (depth <= max_depth_) return core::Status::Ok();
    return Error(fmt::format("messages nested deeper than {} levels", max_depth_));
  }

  core::Status DecodeMessage(std::string_view data, const Message& message, Json& out, int depth) {
    KLUTCH_RETURN_IF_ERROR(EnterMessage(depth));
    if (!out.is_object()) out = Json::object();
    KLUTCH_RETURN_IF_ERROR(ForEachField(
        data,
        [&](uint32_t number, const WireValue& value) {
          const Field* field = message.Find(number);
          if (field == nullptr) return UnknownField(message.name, number, value.wire);
          return DecodeField(*field, value, out, depth);
        },
        &message));
    // Go fields without omitempty whose empty value matters (see kAlways).
    for (const Field& field : message.fields) {
      const FieldSpec& spec = *field.spec;
      if ((spec.flags & kAlways) == 0 || out.contains(spec.json_name)) continue;
      if (spec.flags & kRepeated) {
        out[spec.json_name] = Json::array();
      } else if (spec.kind == Kind::kString) {
        out[spec.json_name] = "";
      }
    }
    return core::Status::Ok();
  }

  core::Status DecodeField(const Field& field, const WireValue& value, Json& out, int depth) {
    const FieldSpec& spec = *field.spec;
    if (spec.flags & kInline) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "message"));
      return DecodeMessage(value.bytes, *field.message, out, depth + 1);
    }
    PathScope scope(path_, spec.json_name);
    const std::string key(spec.json_name);

    if (spec.flags & kMap) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "map"));
      std::string entry_key;
      Json entry_value;
      KLUTCH_RETURN_IF_ERROR(DecodeMapEntry(spec.kind, value.bytes, entry_key, entry_value));
      Json& map = out[key];
      if (!map.is_object()) map = Json::object();
      map[entry_key] = std::move(entry_value);
      return core::Status::Ok();
    }

    if (spec.flags & kRepeated) {
      Json& list = out[key];
      if (!list.is_array()) list = Json::array();
      if (IsVarintKind(spec.kind) && value.wire == kWireLen) {
        // Packed encoding: a run of varints.
        WireReader packed(value.bytes);
        while (!packed.done()) {
          uint64_t v = 0;
          if (!packed.ReadVarint(v)) return Error("malformed varint in packed repeated field");
          list.push_back(VarintToJson(spec.kind, v));
        }
        return core::Status::Ok();
      }
      PathScope index(path_, list.size());
      Json element;
      bool zero = false;
      KLUTCH_RETURN_IF_ERROR(DecodeValue(field, value, element, zero, depth));
      list.push_back(std::move(element));
      return core::Status::Ok();
    }

    if (spec.kind == Kind::kMessage) {
      // A message occurring twice merges, as in Go's generated Unmarshal.
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "message"));
      return DecodeMessage(value.bytes, *field.message, out[key], depth + 1);
    }

    Json decoded;
    bool zero = false;
    KLUTCH_RETURN_IF_ERROR(DecodeValue(field, value, decoded, zero, depth));
    bool keep_zero = (spec.flags & (kPtr | kAlways)) != 0 && spec.kind != Kind::kTime &&
                     spec.kind != Kind::kMicroTime && spec.kind != Kind::kQuantity;
    if (zero && !keep_zero) {
      out.erase(key);  // the last occurrence wins, even when it is the zero value
    } else {
      out[key] = std::move(decoded);
    }
    return core::Status::Ok();
  }

  static Json VarintToJson(Kind kind, uint64_t v) {
    switch (kind) {
      case Kind::kBool:
        return v != 0;
      case Kind::kInt32:
        return static_cast<int32_t>(static_cast<uint32_t>(v));
      default:
        return static_cast<int64_t>(v);
    }
  }

  // One value of `field` (a repeated field's element, or a singular non-message value).
  // `zero` reports whether it is Go's zero value for its type.
  core::Status DecodeValue(const Field& field, const WireValue& value, Json& out, bool& zero,
                           int depth) {
    const FieldSpec& spec = *field.spec;
    if (IsVarintKind(spec.kind)) {
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
      out = VarintToJson(spec.kind, value.varint);
      zero =
          spec.kind == Kind::kInt32 ? static_cast<uint32_t>(value.varint) == 0 : value.varint == 0;
      return core::Status::Ok();
    }
    KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "length-delimited"));
    if (spec.kind == Kind::kMessage) {
      zero = false;
      return DecodeMessage(value.bytes, *field.message, out, depth + 1);
    }
    return DecodeLenValue(spec.kind, value.bytes, out, zero);
  }

  // Values carried as length-delimited bytes: strings, bytes and the well-known wrappers.
  core::Status DecodeLenValue(Kind kind, std::string_view bytes, Json& out, bool& zero) {
    switch (kind) {
      case Kind::kString:
        if (!IsValidUtf8(bytes)) return Error("string is not valid UTF-8");
        out = std::string(bytes);
        zero = bytes.empty();
        return core::Status::Ok();
      case Kind::kBytes:
        out = core::Base64Encode(bytes);
        zero = bytes.empty();
        return core::Status::Ok();
      case Kind::kTime:
      case Kind::kMicroTime:
        return DecodeTime(bytes, kind == Kind::kMicroTime, out, zero);
      case Kind::kQuantity:
        return DecodeQuantity(bytes, out, zero);
      case Kind::kIntOrString:
        return DecodeIntOrString(bytes, out, zero);
      case Kind::kFieldsV1:
        return DecodeFieldsV1(bytes, out, zero);
      case Kind::kStringList:
        return DecodeStringList(bytes, out, zero);
      default:
        return Error("internal error: unexpected value kind");
    }
  }

  core::Status DecodeTime(std::string_view bytes, bool micro, Json& out, bool& zero) {
    int64_t seconds = 0;
    int64_t nanos = 0;
    std::string_view name = micro ? "MicroTime" : "Time";
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1 && number != 2) return UnknownField(name, number, value.wire);
      PathScope scope(path_, number == 1 ? "seconds" : "nanos");
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
      if (number == 1) {
        seconds = static_cast<int64_t>(value.varint);
      } else {
        nanos = static_cast<int32_t>(static_cast<uint32_t>(value.varint));
      }
      return core::Status::Ok();
    }));
    zero = (seconds == 0 || seconds == kMinRfc3339Seconds) && nanos == 0;
    if (zero) return core::Status::Ok();
    if (seconds < kMinRfc3339Seconds || seconds > kMaxRfc3339Seconds) {
      return Error(fmt::format("time out of range: {} seconds", seconds));
    }
    if (nanos < 0 || nanos > 999999999) {
      return Error(fmt::format("time nanos out of range: {}", nanos));
    }
    out = FormatRfc3339(seconds, static_cast<int32_t>(nanos), micro);
    return core::Status::Ok();
  }

  core::Status DecodeQuantity(std::string_view bytes, Json& out, bool& zero) {
    std::string_view text;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("Quantity", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
      text = value.bytes;
      return core::Status::Ok();
    }));
    if (!IsValidUtf8(text)) return Error("quantity is not valid UTF-8");
    out = std::string(text);
    zero = text.empty();
    return core::Status::Ok();
  }

  core::Status DecodeIntOrString(std::string_view bytes, Json& out, bool& zero) {
    int64_t type = 0;
    int32_t int_value = 0;
    std::string_view str_value;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      switch (number) {
        case 1:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
          type = static_cast<int64_t>(value.varint);
          return core::Status::Ok();
        case 2:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireVarint, "varint"));
          int_value = static_cast<int32_t>(static_cast<uint32_t>(value.varint));
          return core::Status::Ok();
        case 3:
          KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
          str_value = value.bytes;
          return core::Status::Ok();
        default:
          return UnknownField("IntOrString", number, value.wire);
      }
    }));
    if (type == 0) {
      out = int_value;
      zero = int_value == 0;
    } else if (type == 1) {
      if (!IsValidUtf8(str_value)) return Error("string is not valid UTF-8");
      out = std::string(str_value);
      zero = str_value.empty();
    } else {
      return Error(fmt::format("IntOrString type must be 0 (int) or 1 (string), got {}", type));
    }
    return core::Status::Ok();
  }

  core::Status DecodeFieldsV1(std::string_view bytes, Json& out, bool& zero) {
    std::string_view raw;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("FieldsV1", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "bytes"));
      raw = value.bytes;
      return core::Status::Ok();
    }));
    zero = raw.empty();
    if (zero) return core::Status::Ok();
    if (JsonNesting(raw) > kMaxFieldsV1Nesting) {
      return Error(fmt::format("FieldsV1 JSON nested deeper than {} levels", kMaxFieldsV1Nesting));
    }
    core::Result<Json> parsed = ParseJson(raw);
    if (!parsed.ok()) return Error(fmt::format("FieldsV1: {}", parsed.status().message()));
    if (!parsed->is_object()) return Error("FieldsV1 must hold a JSON object");
    out = std::move(parsed).value();
    return core::Status::Ok();
  }

  core::Status DecodeStringList(std::string_view bytes, Json& out, bool& zero) {
    out = Json::array();
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& value) {
      if (number != 1) return UnknownField("ExtraValue", number, value.wire);
      KLUTCH_RETURN_IF_ERROR(ExpectWire(value, kWireLen, "string"));
      if (!IsValidUtf8(value.bytes)) return Error("string is not valid UTF-8");
      out.push_back(std::string(value.bytes));
      return core::Status::Ok();
    }));
    zero = out.empty();
    return core::Status::Ok();
  }

  // A map entry {1: key, 2: value}; absent parts take their zero value, like Go.
  core::Status DecodeMapEntry(Kind value_kind, std::string_view bytes, std::string& key,
                              Json& value) {
    bool have_value = false;
    KLUTCH_RETURN_IF_ERROR(ForEachField(bytes, [&](uint32_t number, const WireValue& wire) {
      if (number == 1) {
        KLUTCH_RETURN_IF_ERROR(ExpectWire(wire, kWireLen, "map key"));
        if (!IsValidUtf8(wire.bytes)) return Error("map key is not valid UTF-8");
        key = std::string(wire.bytes);
        return core::Status::Ok();
      }
      if (number == 2) {
        KLUTCH_RETURN_IF_ERROR(ExpectWire(wire, kWireLen, "map value"));
        bool zero = false;
        have_value = true;
        return DecodeLenValue(value_kind, wire.bytes, value, zero);
      }
      return UnknownField("map entry", number, wire.wire);
    }));
    if (!have_value) {
      bool zero = false;
      KLUTCH_RETURN_IF_ERROR(DecodeLenValue(value_kind, "", value, zero));
    }
    // A zero Quantity in a map still prints as "0" in Go.
    if (value_kind == Kind::kQuantity && value == "") value = "0";
    return core::Status::Ok();
  }

  std::string type_name_;
  int max_depth_;
  std::string path_;
};

// runtime.Unknown: the envelope around the object message.
struct Envelope {
  std::string api_version;
  std::string kind;
  std::string_view raw;
  std::string content_encoding;
  std::string content_type;
};

core::Status EnvelopeError(std::string_view what) {
  return core::BadRequest(fmt::format("protobuf envelope: {}", what));
}

core::Status ReadEnvelopeString(const WireValue& value, std::string_view name, std::string& out) {
  if (value.wire != kWireLen) {
    return EnvelopeError(fmt::format("wrong wire type {} for {}", value.wire, name));
  }
  if (!IsValidUtf8(value.bytes)) return EnvelopeError(fmt::format("{} is not valid UTF-8", name));
  out = std::string(value.bytes);
  return core::Status::Ok();
}

core::Status DecodeEnvelope(std::string_view data, Envelope& env) {
  WireReader reader(data);
  while (!reader.done()) {
    uint32_t number = 0;
    WireValue value;
    std::string problem = reader.Next(number, value);
    if (!problem.empty()) return EnvelopeError(problem);
    switch (number) {
      case 1: {  // typeMeta
        if (value.wire != kWireLen) return EnvelopeError("wrong wire type for typeMeta");
        WireReader meta(value.bytes);
        while (!meta.done()) {
          uint32_t meta_number = 0;
          WireValue meta_value;
          problem = meta.Next(meta_number, meta_value);
          if (!problem.empty()) return EnvelopeError(fmt::format("typeMeta: {}", problem));
          if (meta_number == 1) {
            KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(meta_value, "apiVersion", env.api_version));
          } else if (meta_number == 2) {
            KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(meta_value, "kind", env.kind));
          } else {
            return EnvelopeError(
                fmt::format("unknown field number {} in message TypeMeta", meta_number));
          }
        }
        break;
      }
      case 2:  // raw
        if (value.wire != kWireLen) return EnvelopeError("wrong wire type for raw");
        env.raw = value.bytes;
        break;
      case 3:
        KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(value, "contentEncoding", env.content_encoding));
        break;
      case 4:
        KLUTCH_RETURN_IF_ERROR(ReadEnvelopeString(value, "contentType", env.content_type));
        break;
      default:
        return EnvelopeError(fmt::format("unknown field number {} in message Unknown", number));
    }
  }
  return core::Status::Ok();
}

}  // namespace

core::Result<Json> DecodeKubernetesProtobuf(std::string_view body) {
  return DecodeKubernetesProtobuf(body, ProtobufDecodeOptions{});
}

core::Result<Json> DecodeKubernetesProtobuf(std::string_view body,
                                            const ProtobufDecodeOptions& options) {
  if (body.substr(0, kMagic.size()) != kMagic) {
    return core::BadRequest(
        "protobuf body does not start with the Kubernetes magic prefix \"k8s\\x00\"");
  }
  Envelope env;
  KLUTCH_RETURN_IF_ERROR(DecodeEnvelope(body.substr(kMagic.size()), env));
  if (!env.content_encoding.empty()) {
    return core::Status(core::Reason::kUnsupportedMediaType,
                        fmt::format("protobuf envelope: unsupported contentEncoding {}",
                                    Quote(env.content_encoding)));
  }
  if (!env.content_type.empty() && env.content_type != kKubernetesProtobufContentType) {
    return core::Status(
        core::Reason::kUnsupportedMediaType,
        fmt::format("protobuf envelope: unsupported contentType {}", Quote(env.content_type)));
  }
  if (env.kind.empty()) return core::BadRequest("protobuf envelope: Object 'Kind' is missing");
  const Message* message = Registry::Get().FindKind(env.api_version, env.kind);
  if (message == nullptr) {
    return core::Status(core::Reason::kUnsupportedMediaType,
                        fmt::format("protobuf decoding is not supported for apiVersion {}, kind {}",
                                    Quote(env.api_version), Quote(env.kind)));
  }
  Json out = Json::object();
  if (!env.api_version.empty()) out["apiVersion"] = env.api_version;
  out["kind"] = env.kind;
  std::string type_name =
      env.api_version.empty() ? env.kind : fmt::format("{} {}", env.api_version, env.kind);
  Decoder decoder(std::move(type_name), options.max_depth);
  KLUTCH_RETURN_IF_ERROR(decoder.DecodeObject(env.raw, *message, out));
  return out;
}

std::vector<std::pair<std::string, std::string>> ProtobufDecodableKinds() {
  std::vector<std::pair<std::string, std::string>> kinds;
  for (const KindSpec& k : kKinds) kinds.emplace_back(k.api_version, k.kind);
  return kinds;
}

}  // namespace klutch::machinery
