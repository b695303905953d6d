#include "codec/protobuf.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "apis/builtin_schemas.h"

namespace klutch::codec::protobuf_test {
namespace {

using machinery::Dump;
using machinery::Json;

// ---- Tiny protobuf writer, for building bodies in tests only. ----

std::string EncodeVarint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

std::string Key(uint32_t number, uint32_t wire) {
  return EncodeVarint((uint64_t{number} << 3) | wire);
}

// A length-delimited field (string, bytes, message, map entry).
std::string Bytes(uint32_t number, std::string_view payload) {
  return Key(number, 2) + EncodeVarint(payload.size()) + std::string(payload);
}

// A varint field; negative values are sign-extended to 64 bits, as Go writes int32 and int64.
std::string Varint(uint32_t number, int64_t v) {
  return Key(number, 0) + EncodeVarint(static_cast<uint64_t>(v));
}

std::string Entry(std::string_view key, std::string_view value) {
  return Bytes(1, key) + Bytes(2, value);
}

std::string TimeMsg(int64_t seconds, int32_t nanos) {
  return Varint(1, seconds) + Varint(2, nanos);
}

std::string IntOrStr(int32_t v) { return Varint(1, 0) + Varint(2, v) + Bytes(3, ""); }
std::string IntOrStr(std::string_view s) { return Varint(1, 1) + Varint(2, 0) + Bytes(3, s); }

// The envelope as client-go writes it: magic + runtime.Unknown with empty encoding and type.
std::string Envelope(std::string_view api_version, std::string_view kind, std::string_view raw) {
  return std::string("k8s\0", 4) + Bytes(1, Bytes(1, api_version) + Bytes(2, kind)) +
         Bytes(2, raw) + Bytes(3, "") + Bytes(4, "");
}

// ObjectMeta the way Go marshals it for kubectl's typed commands: every non-pointer field,
// zero or not (name, generateName, namespace, selfLink, uid, resourceVersion, generation,
// creationTimestamp), then `rest` (labels and so on, which follow in field order).
std::string GoObjectMeta(std::string_view name, std::string_view ns, std::string_view rest = "") {
  return Bytes(1, name) + Bytes(2, "") + Bytes(3, ns) + Bytes(4, "") + Bytes(5, "") + Bytes(6, "") +
         Varint(7, 0) + Bytes(8, "") + std::string(rest);
}

std::string HexDecode(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

void ExpectJson(const core::Result<Json>& got, std::string_view want) {
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  Json expected = Json::parse(want);
  EXPECT_EQ(*got, expected) << "got:  " << Dump(*got) << "\nwant: " << Dump(expected);
}

void ExpectError(const core::Result<Json>& got, core::Reason reason,
                 std::initializer_list<std::string_view> fragments) {
  ASSERT_FALSE(got.ok()) << "decoded to " << Dump(*got);
  EXPECT_EQ(got.status().reason(), reason) << got.status().ToString();
  for (std::string_view fragment : fragments) {
    EXPECT_NE(got.status().message().find(fragment), std::string::npos)
        << "message \"" << got.status().message() << "\" lacks \"" << fragment << "\"";
  }
}

// ---- Real request bodies captured from kubectl 1.32 (kubectl-probe results, hex). ----

constexpr std::string_view kCreateNamespace =
    "6b3873000a0f0a02763112094e616d657370616365121c0a140a0464656d6f12001a0022002a003200380042001200"
    "1a020a001a002200";
constexpr std::string_view kCreateConfigMap =
    "6b3873000a0f0a0276311209436f6e6669674d617012390a1e0a0a6170702d636f6e66696712001a0464656d6f2200"
    "2a00320038004200120a0a056c6576656c120133120b0a046d6f646512036465761a002200";
constexpr std::string_view kCreateSecret =
    "6b3873000a0c0a027631120653656372657412440a190a05637265647312001a0464656d6f22002a00320038004200"
    "12120a0870617373776f7264120673336372337412110a08757365726e616d65120561646d696e1a001a002200";
constexpr std::string_view kCreateServiceAccount =
    "6b3873000a140a027631120e536572766963654163636f756e74121b0a190a05726f626f7412001a0464656d6f2200"
    "2a003200380042001a002200";
constexpr std::string_view kCreateRole =
    "6b3873000a240a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f76311204526f6c65123b0a1e0a"
    "0a706f642d72656164657212001a0464656d6f22002a0032003800420012190a036765740a046c69737412001a0a63"
    "6f6e6669676d6170731a002200";
constexpr std::string_view kCreateRoleBinding =
    "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b526f6c6542696e6469"
    "6e6712700a1e0a0a706f642d72656164657212001a0464656d6f22002a00320038004200121f0a0e53657276696365"
    "4163636f756e7412001a05726f626f74220464656d6f1a2d0a19726261632e617574686f72697a6174696f6e2e6b38"
    "732e696f1204526f6c651a0a706f642d7265616465721a002200";
constexpr std::string_view kCreateClusterRole =
    "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b436c7573746572526f"
    "6c65122b0a170a0763722d7669657712001a0022002a0032003800420012100a0367657412001a0773656372657473"
    "1a002200";
constexpr std::string_view kCreateClusterRoleBinding =
    "6b3873000a320a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f76311212436c7573746572526f"
    "6c6542696e64696e6712760a170a0763722d7669657712001a0022002a0032003800420012280a0455736572121972"
    "6261632e617574686f72697a6174696f6e2e6b38732e696f1a03626f6222001a310a19726261632e617574686f7269"
    "7a6174696f6e2e6b38732e696f120b436c7573746572526f6c651a0763722d766965771a002200";
constexpr std::string_view kAuthCanIDeleteSecrets =
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363"
    "657373526576696577123f0a100a0012001a0022002a0032003800420012210a1f0a0464656d6f120664656c657465"
    "1a0022002a077365637265747332003a001a08080012001a0020001a002200";
constexpr std::string_view kAuthCanIGetConfigMapWeb =
    "6b3873000a320a17617574686f72697a6174696f6e2e6b38732e696f2f7631121753656c665375626a656374416363"
    "65737352657669657712420a100a0012001a0022002a0032003800420012240a220a0464656d6f1203676574"
    "1a0022002a0a636f6e6669676d61707332003a037765621a08080012001a0020001a002200";
constexpr std::string_view kAuthCanIList =
    "6b3873000a310a17617574686f72697a6174696f6e2e6b38732e696f2f7631121653656c665375626a6563745275"
    "6c657352657669657712200a100a0012001a0022002a0032003800420012060a0464656d6f1a04180022001a00220"
    "0";
constexpr std::string_view kAuthWhoami =
    "6b3873000a2d0a1861757468656e7469636174696f6e2e6b38732e696f2f7631121153656c665375626a6563745265"
    "76696577121a0a100a0012001a0022002a0032003800420012060a040a0012001a002200";
constexpr std::string_view kCreateToken =
    "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e5265717565737412"
    "1a0a100a0012001a0022002a0032003800420012001a040a0012001a002200";
constexpr std::string_view kCreateTokenWithAudience =
    "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e5265717565737412"
    "220a100a0012001a0022002a0032003800420012080a0361706920d8041a040a0012001a002200";

TEST(DecodeKubernetesProtobuf, KubectlCreateNamespace) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateNamespace)),
             R"({"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"},
                 "spec":{},"status":{}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateConfigMapFromLiteral) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateConfigMap)),
             R"({"apiVersion":"v1","kind":"ConfigMap",
                 "metadata":{"name":"app-config","namespace":"demo"},
                 "data":{"level":"3","mode":"dev"}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateSecretGenericEncodesDataAsBase64) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateSecret)),
             R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"creds","namespace":"demo"},
                 "data":{"password":"czNjcjN0","username":"YWRtaW4="}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateServiceAccount) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateServiceAccount)),
             R"({"apiVersion":"v1","kind":"ServiceAccount",
                 "metadata":{"name":"robot","namespace":"demo"}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateRoleKeepsEmptyApiGroup) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateRole)),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role",
                 "metadata":{"name":"pod-reader","namespace":"demo"},
                 "rules":[{"verbs":["get","list"],"apiGroups":[""],"resources":["configmaps"]}]})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateRoleBindingKeepsSubjectApiGroup) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateRoleBinding)),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
                 "metadata":{"name":"pod-reader","namespace":"demo"},
                 "subjects":[{"kind":"ServiceAccount","apiGroup":"","name":"robot",
                              "namespace":"demo"}],
                 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role",
                            "name":"pod-reader"}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateClusterRole) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateClusterRole)),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
                 "metadata":{"name":"cr-view"},
                 "rules":[{"verbs":["get"],"apiGroups":[""],"resources":["secrets"]}]})");
}

// An empty Subject.namespace is omitted, as Go's JSON (omitempty) prints it.
TEST(DecodeKubernetesProtobuf, KubectlCreateClusterRoleBindingOmitsEmptySubjectNamespace) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateClusterRoleBinding)),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRoleBinding",
                 "metadata":{"name":"cr-view"},
                 "subjects":[{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"bob"}],
                 "roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole",
                            "name":"cr-view"}})");
}

TEST(DecodeKubernetesProtobuf, KubectlAuthCanI) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kAuthCanIDeleteSecrets)),
             R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
                 "metadata":{},
                 "spec":{"resourceAttributes":{"namespace":"demo","verb":"delete",
                                               "resource":"secrets"}},
                 "status":{}})");
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kAuthCanIGetConfigMapWeb)),
             R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
                 "metadata":{},
                 "spec":{"resourceAttributes":{"namespace":"demo","verb":"get",
                                               "resource":"configmaps","name":"web"}},
                 "status":{}})");
}

TEST(DecodeKubernetesProtobuf, KubectlAuthCanIList) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kAuthCanIList)),
             R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectRulesReview",
                 "metadata":{},"spec":{"namespace":"demo"},"status":{}})");
}

TEST(DecodeKubernetesProtobuf, KubectlAuthWhoami) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kAuthWhoami)),
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview",
                 "metadata":{},"status":{"userInfo":{}}})");
}

TEST(DecodeKubernetesProtobuf, KubectlCreateToken) {
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateToken)),
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest",
                 "metadata":{},"spec":{},"status":{}})");
  ExpectJson(DecodeKubernetesProtobuf(HexDecode(kCreateTokenWithAudience)),
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","metadata":{},
                 "spec":{"audiences":["api"],"expirationSeconds":600},"status":{}})");
}

// Every protobuf body in every probe log decodes, to the kind the probe stub saw and with the
// metadata the stub's independent decoder produced.
TEST(DecodeKubernetesProtobuf, DecodesEveryBodyCapturedFromKubectl) {
  std::filesystem::path dir =
      std::filesystem::path(KLUTCH_SHARED_DIR) / "specs" / "kubectl-probe" / "results";
  ASSERT_TRUE(std::filesystem::exists(dir)) << dir
                                            << " is missing: the shared probe results "
                                               "are required";
  int bodies = 0;
  for (const auto& file : std::filesystem::directory_iterator(dir)) {
    if (!file.path().string().ends_with(".requests.jsonl")) continue;
    std::ifstream in(file.path());
    std::string line;
    while (std::getline(in, line)) {
      Json request = Json::parse(line);
      const Json& body = request["body"];
      if (!body.is_object() || !body.contains("_raw_hex")) continue;
      ++bodies;
      auto got = DecodeKubernetesProtobuf(HexDecode(body["_raw_hex"].get<std::string>()));
      ASSERT_TRUE(got.ok()) << file.path() << ": " << got.status().ToString();
      const Json& stub = body["_protobuf_decoded"];
      EXPECT_EQ((*got)["apiVersion"], stub["apiVersion"]);
      EXPECT_EQ((*got)["kind"], stub["kind"]);
      EXPECT_EQ((*got)["metadata"], stub["metadata"]) << Dump(*got);
    }
  }
  EXPECT_GE(bodies, 15);
}

// ---- Hand-built bodies. ----

TEST(DecodeKubernetesProtobuf, LeaseKeepsPointerZerosAndFormatsMicroTime) {
  std::string spec = Bytes(1, "") + Varint(2, 15) + Bytes(3, TimeMsg(1700000000, 123456789)) +
                     Bytes(4, TimeMsg(1700000005, 999999999)) + Varint(5, 0) +
                     Bytes(6, "OldestEmulationVersion");
  std::string raw = Bytes(1, GoObjectMeta("controller", "kube-system")) + Bytes(2, spec);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("coordination.k8s.io/v1", "Lease", raw)),
             R"({"apiVersion":"coordination.k8s.io/v1","kind":"Lease",
                 "metadata":{"name":"controller","namespace":"kube-system"},
                 "spec":{"holderIdentity":"","leaseDurationSeconds":15,
                         "acquireTime":"2023-11-14T22:13:20.123456Z",
                         "renewTime":"2023-11-14T22:13:25.999999Z","leaseTransitions":0,
                         "strategy":"OldestEmulationVersion"}})");
}

TEST(DecodeKubernetesProtobuf, CoreEvent) {
  std::string involved = Bytes(1, "Pod") + Bytes(2, "default") + Bytes(3, "web") +
                         Bytes(4, "uid-1") + Bytes(5, "v1") + Bytes(6, "") +
                         Bytes(7, "spec.containers{web}");
  std::string raw = Bytes(1, GoObjectMeta("web.17a", "default")) + Bytes(2, involved) +
                    Bytes(3, "Pulled") + Bytes(4, "Pulled image \"nginx\"") +
                    Bytes(5, Bytes(1, "kubelet") + Bytes(2, "node-1")) +
                    Bytes(6, TimeMsg(1700000000, 0)) + Bytes(7, TimeMsg(1700000060, 500)) +
                    Varint(8, 2) + Bytes(9, "Normal") + Bytes(10, "") +
                    Bytes(11, Varint(1, 4) + Bytes(2, TimeMsg(1700000061, 1000))) + Bytes(12, "") +
                    Bytes(14, "kubelet") + Bytes(15, "node-1");
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "Event", raw)),
             R"({"apiVersion":"v1","kind":"Event",
                 "metadata":{"name":"web.17a","namespace":"default"},
                 "involvedObject":{"kind":"Pod","namespace":"default","name":"web","uid":"uid-1",
                                   "apiVersion":"v1","fieldPath":"spec.containers{web}"},
                 "reason":"Pulled","message":"Pulled image \"nginx\"",
                 "source":{"component":"kubelet","host":"node-1"},
                 "firstTimestamp":"2023-11-14T22:13:20Z","lastTimestamp":"2023-11-14T22:14:20Z",
                 "count":2,"type":"Normal",
                 "series":{"count":4,"lastObservedTime":"2023-11-14T22:14:21.000001Z"},
                 "reportingComponent":"kubelet","reportingInstance":"node-1"})");
}

TEST(DecodeKubernetesProtobuf, EventsV1Event) {
  std::string raw =
      Bytes(1, GoObjectMeta("web.17b", "default")) + Bytes(2, TimeMsg(1700000000, 5000)) +
      Bytes(3, Varint(1, 3) + Bytes(2, TimeMsg(1700000100, 0))) +
      Bytes(4, "example.com/controller") + Bytes(5, "controller-0") + Bytes(6, "Scale") +
      Bytes(7, "ScaledUp") +
      Bytes(8,
            Bytes(1, "Deployment") + Bytes(2, "default") + Bytes(3, "web") + Bytes(5, "apps/v1")) +
      Bytes(10, "scaled to 3") + Bytes(11, "Normal") + Bytes(12, "") + Bytes(13, "") +
      Bytes(14, "") + Varint(15, 0);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("events.k8s.io/v1", "Event", raw)),
             R"({"apiVersion":"events.k8s.io/v1","kind":"Event",
                 "metadata":{"name":"web.17b","namespace":"default"},
                 "eventTime":"2023-11-14T22:13:20.000005Z",
                 "series":{"count":3,"lastObservedTime":"2023-11-14T22:15:00.000000Z"},
                 "reportingController":"example.com/controller",
                 "reportingInstance":"controller-0","action":"Scale","reason":"ScaledUp",
                 "regarding":{"kind":"Deployment","namespace":"default","name":"web",
                              "apiVersion":"apps/v1"},
                 "note":"scaled to 3","type":"Normal","deprecatedSource":{}})");
}

// `kubectl create deployment web --image=nginx --port=80 --replicas=2 -- /bin/sh -c "sleep 1"`,
// written field by field the way Go marshals it (zero scalars of non-pointer fields included),
// with a rolling update strategy added.
TEST(DecodeKubernetesProtobuf, DeploymentAsKubectlCreatesIt) {
  std::string port = Bytes(1, "") + Varint(2, 0) + Varint(3, 80) + Bytes(4, "") + Bytes(5, "");
  std::string container = Bytes(1, "nginx") + Bytes(2, "nginx") + Bytes(3, "/bin/sh") +
                          Bytes(3, "-c") + Bytes(3, "sleep 1") + Bytes(5, "") + Bytes(6, port) +
                          Bytes(8, "") + Bytes(13, "") + Bytes(14, "") + Varint(16, 0) +
                          Varint(17, 0) + Varint(18, 0) + Bytes(20, "");
  std::string pod_spec = Bytes(2, container) + Bytes(3, "") + Bytes(6, "") + Bytes(8, "") +
                         Bytes(9, "") + Bytes(10, "") + Varint(11, 0) + Varint(12, 0) +
                         Varint(13, 0) + Bytes(16, "") + Bytes(17, "") + Bytes(19, "") +
                         Bytes(24, "");
  std::string labels = Bytes(11, Entry("app", "web"));
  std::string template_spec = Bytes(1, GoObjectMeta("", "", labels)) + Bytes(2, pod_spec);
  std::string strategy =
      Bytes(1, "RollingUpdate") + Bytes(2, Bytes(1, IntOrStr(0)) + Bytes(2, IntOrStr("25%")));
  std::string spec = Varint(1, 2) + Bytes(2, Bytes(1, Entry("app", "web"))) +
                     Bytes(3, template_spec) + Bytes(4, strategy) + Varint(5, 0) + Varint(7, 0);
  std::string status =
      Varint(1, 0) + Varint(2, 0) + Varint(3, 0) + Varint(4, 0) + Varint(5, 0) + Varint(7, 0);
  std::string raw =
      Bytes(1, GoObjectMeta("web", "default", labels)) + Bytes(2, spec) + Bytes(3, status);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", raw)),
             R"({"apiVersion":"apps/v1","kind":"Deployment",
                 "metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
                 "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
                         "template":{"metadata":{"labels":{"app":"web"}},
                                     "spec":{"containers":[{"name":"nginx","image":"nginx",
                                        "command":["/bin/sh","-c","sleep 1"],
                                        "ports":[{"containerPort":80}],"resources":{}}]}},
                         "strategy":{"type":"RollingUpdate",
                                     "rollingUpdate":{"maxUnavailable":0,"maxSurge":"25%"}}},
                 "status":{}})");
}

TEST(DecodeKubernetesProtobuf, PodSpecDetails) {
  std::string env = Bytes(1, "PASSWORD") + Bytes(2, "") +
                    Bytes(3, Bytes(4, Bytes(1, Bytes(1, "db")) + Bytes(2, "password")));
  std::string resources =
      Bytes(1, Entry("cpu", Bytes(1, "500m"))) + Bytes(2, Entry("memory", Bytes(1, "64Mi")));
  std::string probe =
      Bytes(1, Bytes(2, Bytes(1, "/healthz") + Bytes(2, IntOrStr("http")) + Bytes(4, "HTTP"))) +
      Varint(2, 5) + Varint(3, 1) + Varint(4, 10) + Varint(5, 1) + Varint(6, 3);
  std::string security = Bytes(1, Bytes(2, "ALL")) + Varint(5, 1) + Varint(7, 0) +
                         Bytes(11, Bytes(1, "RuntimeDefault"));
  std::string container = Bytes(1, "app") + Bytes(2, "example/app:1") + Bytes(7, env) +
                          Bytes(8, resources) +
                          Bytes(9, Bytes(1, "config") + Varint(2, 1) + Bytes(3, "/etc/app")) +
                          Bytes(10, probe) + Bytes(13, "/dev/termination-log") +
                          Bytes(14, "IfNotPresent") + Bytes(15, security) + Bytes(20, "File");
  std::string volume =
      Bytes(1, "config") + Bytes(2, Bytes(19, Bytes(1, Bytes(1, "app-config")) + Varint(3, 420)));
  std::string pod_security = Varint(2, 1000) + Bytes(4, EncodeVarint(1000) + EncodeVarint(2000)) +
                             Varint(4, 3000) + Varint(5, 2000);
  std::string toleration = Bytes(1, "node.kubernetes.io/not-ready") + Bytes(2, "Exists") +
                           Bytes(4, "NoExecute") + Varint(5, 0);
  std::string affinity =
      Bytes(1, Bytes(1, Bytes(1, Bytes(1, Bytes(1, "zone") + Bytes(2, "In") + Bytes(3, "a")))));
  std::string pod_spec = Bytes(1, volume) + Bytes(2, container) + Bytes(3, "Always") +
                         Varint(4, 30) + Bytes(6, "ClusterFirst") + Bytes(14, pod_security) +
                         Bytes(18, affinity) + Bytes(19, "default-scheduler") +
                         Bytes(22, toleration) + Varint(30, 0);
  std::string spec = Bytes(3, Bytes(2, pod_spec));
  auto got = DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", Bytes(2, spec)));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectJson(Json((*got)["spec"]["template"]["spec"]), R"({
      "volumes":[{"name":"config","configMap":{"name":"app-config","defaultMode":420}}],
      "containers":[{"name":"app","image":"example/app:1",
        "env":[{"name":"PASSWORD","valueFrom":{"secretKeyRef":{"name":"db","key":"password"}}}],
        "resources":{"limits":{"cpu":"500m"},"requests":{"memory":"64Mi"}},
        "volumeMounts":[{"name":"config","readOnly":true,"mountPath":"/etc/app"}],
        "livenessProbe":{"httpGet":{"path":"/healthz","port":"http","scheme":"HTTP"},
                         "initialDelaySeconds":5,"timeoutSeconds":1,"periodSeconds":10,
                         "successThreshold":1,"failureThreshold":3},
        "terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent",
        "securityContext":{"capabilities":{"drop":["ALL"]},"runAsNonRoot":true,
                           "allowPrivilegeEscalation":false,
                           "seccompProfile":{"type":"RuntimeDefault"}},
        "terminationMessagePolicy":"File"}],
      "restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst",
      "securityContext":{"runAsUser":1000,"supplementalGroups":[1000,2000,3000],
                         "fsGroup":2000},
      "affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{
        "nodeSelectorTerms":[{"matchExpressions":[{"key":"zone","operator":"In",
                                                   "values":["a"]}]}]}}},
      "schedulerName":"default-scheduler",
      "tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists",
                      "effect":"NoExecute","tolerationSeconds":0}],
      "enableServiceLinks":false})");
}

TEST(DecodeKubernetesProtobuf, ServiceNodePortAndExternalName) {
  std::string port = Bytes(1, "80-8080") + Bytes(2, "TCP") + Varint(3, 80) +
                     Bytes(4, IntOrStr(8080)) + Varint(5, 0);
  std::string spec = Bytes(1, port) + Bytes(2, Entry("app", "web")) + Bytes(3, "") +
                     Bytes(4, "NodePort") + Bytes(7, "") + Bytes(8, "") + Bytes(10, "") +
                     Bytes(11, "") + Varint(12, 0) + Varint(13, 0);
  std::string raw =
      Bytes(1, GoObjectMeta("web", "default")) + Bytes(2, spec) + Bytes(3, Bytes(1, ""));
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "Service", raw)),
             R"({"apiVersion":"v1","kind":"Service",
                 "metadata":{"name":"web","namespace":"default"},
                 "spec":{"ports":[{"name":"80-8080","protocol":"TCP","port":80,
                                   "targetPort":8080}],
                         "selector":{"app":"web"},"type":"NodePort"},
                 "status":{"loadBalancer":{}}})");

  std::string external = Bytes(1, Bytes(1, "http") + Varint(3, 80) + Bytes(4, IntOrStr("http")) +
                                      Bytes(6, "kubernetes.io/h2c")) +
                         Bytes(4, "ExternalName") + Bytes(10, "example.com");
  auto got = DecodeKubernetesProtobuf(Envelope("v1", "Service", Bytes(2, external)));
  ExpectJson(got, R"({"apiVersion":"v1","kind":"Service",
                      "spec":{"ports":[{"name":"http","port":80,"targetPort":"http",
                                        "appProtocol":"kubernetes.io/h2c"}],
                              "type":"ExternalName","externalName":"example.com"}})");
}

TEST(DecodeKubernetesProtobuf, DeleteOptionsUnderAnyGroupVersion) {
  std::string raw = Varint(1, 0) + Bytes(2, Bytes(1, "uid-1") + Bytes(2, "")) + Varint(3, 0) +
                    Bytes(4, "Foreground") + Bytes(5, "All");
  for (std::string_view api_version : {"v1", "meta.k8s.io/v1", "apps/v1"}) {
    Json want = Json::parse(R"({"kind":"DeleteOptions","gracePeriodSeconds":0,
                                "preconditions":{"uid":"uid-1","resourceVersion":""},
                                "orphanDependents":false,"propagationPolicy":"Foreground",
                                "dryRun":["All"]})");
    want["apiVersion"] = api_version;
    ExpectJson(DecodeKubernetesProtobuf(Envelope(api_version, "DeleteOptions", raw)), Dump(want));
  }
}

TEST(DecodeKubernetesProtobuf, FullObjectMeta) {
  std::string owner = Bytes(1, "ReplicaSet") + Bytes(3, "web-1") + Bytes(4, "uid-rs") +
                      Bytes(5, "apps/v1") + Varint(6, 1) + Varint(7, 0);
  std::string managed = Bytes(1, "kubectl-create") + Bytes(2, "Update") + Bytes(3, "v1") +
                        Bytes(4, TimeMsg(1700000000, 0)) + Bytes(6, "FieldsV1") +
                        Bytes(7, Bytes(1, R"({"f:data":{".":{},"f:a":{}}})")) + Bytes(8, "");
  std::string meta = Bytes(1, "cm") + Bytes(2, "") + Bytes(3, "ns") + Bytes(4, "") +
                     Bytes(5, "uid-cm") + Bytes(6, "42") + Varint(7, 3) +
                     Bytes(8, TimeMsg(1700000000, 0)) + Bytes(9, TimeMsg(-1, 0)) + Varint(10, 0) +
                     Bytes(11, Entry("app", "web")) + Bytes(12, Entry("note", "")) +
                     Bytes(13, owner) + Bytes(14, "example.com/cleanup") + Bytes(17, managed);
  std::string raw = Bytes(1, meta) + Varint(4, 0) + Bytes(2, Entry("a", "1")) +
                    Bytes(3, Entry("bin", std::string("\x00\xff\x10", 3)));
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", raw)),
             R"({"apiVersion":"v1","kind":"ConfigMap",
                 "metadata":{"name":"cm","namespace":"ns","uid":"uid-cm","resourceVersion":"42",
                   "generation":3,"creationTimestamp":"2023-11-14T22:13:20Z",
                   "deletionTimestamp":"1969-12-31T23:59:59Z","deletionGracePeriodSeconds":0,
                   "labels":{"app":"web"},"annotations":{"note":""},
                   "ownerReferences":[{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-1",
                                       "uid":"uid-rs","controller":true,
                                       "blockOwnerDeletion":false}],
                   "finalizers":["example.com/cleanup"],
                   "managedFields":[{"manager":"kubectl-create","operation":"Update",
                                     "apiVersion":"v1","time":"2023-11-14T22:13:20Z",
                                     "fieldsType":"FieldsV1",
                                     "fieldsV1":{"f:data":{".":{},"f:a":{}}}}]},
                 "immutable":false,"data":{"a":"1"},"binaryData":{"bin":"AP8Q"}})");
}

TEST(DecodeKubernetesProtobuf, TimeBoundsAndZeroTimes) {
  auto decode_created = [](int64_t seconds, int32_t nanos) {
    std::string meta = Bytes(8, TimeMsg(seconds, nanos));
    return DecodeKubernetesProtobuf(Envelope("v1", "Namespace", Bytes(1, meta)));
  };
  ExpectJson(decode_created(-62135596799, 0),
             R"({"apiVersion":"v1","kind":"Namespace",
                 "metadata":{"creationTimestamp":"0001-01-01T00:00:01Z"}})");
  ExpectJson(decode_created(253402300799, 999999999),
             R"({"apiVersion":"v1","kind":"Namespace",
                 "metadata":{"creationTimestamp":"9999-12-31T23:59:59Z"}})");
  // Empty message, {0,0} and Go's zero time all mean "unset".
  ExpectJson(decode_created(0, 0), R"({"apiVersion":"v1","kind":"Namespace","metadata":{}})");
  ExpectJson(decode_created(-62135596800, 0),
             R"({"apiVersion":"v1","kind":"Namespace","metadata":{}})");
  ExpectError(decode_created(253402300800, 0), core::Reason::kBadRequest,
              {"metadata.creationTimestamp", "out of range"});
  ExpectError(decode_created(1, 1000000000), core::Reason::kBadRequest,
              {"metadata.creationTimestamp", "nanos"});
}

TEST(DecodeKubernetesProtobuf, SecretStringDataTypeAndImmutable) {
  std::string raw = Bytes(1, GoObjectMeta("tls", "demo")) + Bytes(2, Entry("empty", "")) +
                    Bytes(3, "kubernetes.io/tls") + Bytes(4, Entry("user", "admin")) + Varint(5, 1);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "Secret", raw)),
             R"({"apiVersion":"v1","kind":"Secret","metadata":{"name":"tls","namespace":"demo"},
                 "data":{"empty":""},"type":"kubernetes.io/tls","stringData":{"user":"admin"},
                 "immutable":true})");
}

TEST(DecodeKubernetesProtobuf, TokenRequestBoundObjectReference) {
  std::string bound = Bytes(1, "Pod") + Bytes(2, "v1") + Bytes(3, "web") + Bytes(4, "uid-9");
  std::string spec = Bytes(1, "https://kubernetes.default.svc") + Bytes(3, bound) + Varint(4, 3600);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("authentication.k8s.io/v1", "TokenRequest",
                                               Bytes(1, "") + Bytes(2, spec))),
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","metadata":{},
          "spec":{"audiences":["https://kubernetes.default.svc"],"expirationSeconds":3600,
                  "boundObjectRef":{"kind":"Pod","apiVersion":"v1","name":"web","uid":"uid-9"}}})");
}

TEST(DecodeKubernetesProtobuf, TokenReview) {
  std::string status =
      Varint(1, 1) +
      Bytes(2, Bytes(1, "system:serviceaccount:demo:robot") + Bytes(2, "u") +
                   Bytes(3, "system:serviceaccounts") +
                   Bytes(4, Entry("authentication.kubernetes.io/pod-name", Bytes(1, "web-0")))) +
      Bytes(4, "api");
  std::string raw = Bytes(2, Bytes(1, "token") + Bytes(2, "api")) + Bytes(3, status);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("authentication.k8s.io/v1", "TokenReview", raw)),
             R"({"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview",
                 "spec":{"token":"token","audiences":["api"]},
                 "status":{"authenticated":true,"audiences":["api"],
                           "user":{"username":"system:serviceaccount:demo:robot","uid":"u",
                                   "groups":["system:serviceaccounts"],
                                   "extra":{"authentication.kubernetes.io/pod-name":
                                            ["web-0"]}}}})");
}

TEST(DecodeKubernetesProtobuf, SubjectAccessReviewWithSelectorsAndExtra) {
  std::string field_selector =
      Bytes(2, Bytes(1, "spec.nodeName") + Bytes(2, "In") + Bytes(3, "node-1"));
  std::string attributes = Bytes(1, "demo") + Bytes(2, "list") + Bytes(5, "pods") +
                           Bytes(8, field_selector) + Bytes(9, Bytes(1, "app=web"));
  std::string spec = Bytes(1, attributes) + Bytes(3, "bob") + Bytes(4, "dev") +
                     Bytes(5, Entry("scopes", Bytes(1, "a") + Bytes(1, "b"))) +
                     Bytes(5, Entry("none", "")) + Bytes(6, "uid-bob");
  ExpectJson(
      DecodeKubernetesProtobuf(Envelope("authorization.k8s.io/v1", "SubjectAccessReview",
                                        Bytes(2, spec) + Bytes(3, Varint(1, 0) + Varint(4, 0)))),
      R"({"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview",
          "spec":{"resourceAttributes":{"namespace":"demo","verb":"list","resource":"pods",
                    "fieldSelector":{"requirements":[{"key":"spec.nodeName","operator":"In",
                                                      "values":["node-1"]}]},
                    "labelSelector":{"rawSelector":"app=web"}},
                  "user":"bob","groups":["dev"],"extra":{"scopes":["a","b"],"none":[]},
                  "uid":"uid-bob"},
          "status":{}})");
  ExpectJson(DecodeKubernetesProtobuf(
                 Envelope("authorization.k8s.io/v1", "SelfSubjectAccessReview",
                          Bytes(2, Bytes(2, Bytes(1, "/healthz") + Bytes(2, "get"))))),
             R"({"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
                 "spec":{"nonResourceAttributes":{"path":"/healthz","verb":"get"}}})");
}

TEST(DecodeKubernetesProtobuf, ClusterRoleAggregationAndAlwaysEmittedFields) {
  std::string selector = Bytes(1, Entry("rbac.example.com/aggregate-to-view", "true")) +
                         Bytes(2, Bytes(1, "tier") + Bytes(2, "Exists"));
  std::string raw = Bytes(1, GoObjectMeta("view", "")) + Bytes(2, Bytes(5, "/healthz")) +
                    Bytes(3, Bytes(1, selector));
  ExpectJson(DecodeKubernetesProtobuf(Envelope("rbac.authorization.k8s.io/v1", "ClusterRole", raw)),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole",
                 "metadata":{"name":"view"},
                 "rules":[{"verbs":[],"nonResourceURLs":["/healthz"]}],
                 "aggregationRule":{"clusterRoleSelectors":[
                   {"matchLabels":{"rbac.example.com/aggregate-to-view":"true"},
                    "matchExpressions":[{"key":"tier","operator":"Exists"}]}]}})");
  // RoleRef fields are emitted even when the sender left them out.
  ExpectJson(DecodeKubernetesProtobuf(Envelope("rbac.authorization.k8s.io/v1", "RoleBinding",
                                               Bytes(3, Bytes(3, "view")))),
             R"({"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding",
                 "roleRef":{"apiGroup":"","kind":"","name":"view"}})");
}

TEST(DecodeKubernetesProtobuf, RepeatedOccurrencesMergeAndLastScalarWins) {
  std::string raw = Bytes(1, Bytes(1, "first") + Bytes(3, "ns")) + Bytes(1, Bytes(1, "")) +
                    Bytes(1, Bytes(11, Entry("a", "1"))) + Bytes(1, Bytes(11, Entry("a", "2"))) +
                    Varint(4, 1) + Varint(4, 0);
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", raw)),
             R"({"apiVersion":"v1","kind":"ConfigMap",
                 "metadata":{"namespace":"ns","labels":{"a":"2"}},"immutable":false})");
}

TEST(DecodeKubernetesProtobuf, NegativeIntegersAreSignExtended) {
  std::string raw = Varint(8, -1) + Bytes(1, Varint(10, -30));
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "Event", raw)),
             R"({"apiVersion":"v1","kind":"Event","count":-1,
                 "metadata":{"deletionGracePeriodSeconds":-30}})");
}

TEST(DecodeKubernetesProtobuf, EveryListedKindDecodesAnEmptyObject) {
  auto kinds = ProtobufDecodableKinds();
  EXPECT_GE(kinds.size(), 21u);
  for (const auto& [api_version, kind] : kinds) {
    std::string version = api_version == "*" ? "meta.k8s.io/v1" : api_version;
    auto got = DecodeKubernetesProtobuf(Envelope(version, kind, ""));
    ASSERT_TRUE(got.ok()) << api_version << " " << kind << ": " << got.status().ToString();
    EXPECT_EQ(*got, Json({{"apiVersion", version}, {"kind", kind}}));
  }
}

// `kubectl create quota compute --hard=cpu=2,pods=10 --scopes=NotTerminating`, field by field.
TEST(DecodeKubernetesProtobuf, ResourceQuotaAsKubectlCreatesIt) {
  std::string spec =
      Bytes(1, Entry("cpu", Bytes(1, "2"))) + Bytes(1, Entry("pods", Bytes(1, "10"))) +
      Bytes(2, "NotTerminating") +
      Bytes(3, Bytes(1, Bytes(1, "PriorityClass") + Bytes(2, "In") + Bytes(3, "high")));
  std::string raw = Bytes(1, GoObjectMeta("compute", "demo")) + Bytes(2, spec) + Bytes(3, "");
  ExpectJson(DecodeKubernetesProtobuf(Envelope("v1", "ResourceQuota", raw)),
             R"({"apiVersion":"v1","kind":"ResourceQuota",
                 "metadata":{"name":"compute","namespace":"demo"},
                 "spec":{"hard":{"cpu":"2","pods":"10"},"scopes":["NotTerminating"],
                         "scopeSelector":{"matchExpressions":[
                           {"scopeName":"PriorityClass","operator":"In","values":["high"]}]}},
                 "status":{}})");
}

TEST(DecodeKubernetesProtobuf, LocalSubjectAccessReviewHasItsOwnMessage) {
  std::string spec =
      Bytes(1, Bytes(1, "demo") + Bytes(2, "get") + Bytes(5, "secrets")) + Bytes(3, "alice");
  auto got =
      DecodeKubernetesProtobuf(Envelope("authorization.k8s.io/v1", "LocalSubjectAccessReview",
                                        Bytes(1, Bytes(3, "demo")) + Bytes(2, spec)));
  ExpectJson(got, R"({"apiVersion":"authorization.k8s.io/v1","kind":"LocalSubjectAccessReview",
                      "metadata":{"namespace":"demo"},
                      "spec":{"resourceAttributes":{"namespace":"demo","verb":"get",
                                                    "resource":"secrets"},
                              "user":"alice"}})");
  ExpectError(DecodeKubernetesProtobuf(
                  Envelope("authorization.k8s.io/v1", "LocalSubjectAccessReview", Varint(9, 1))),
              core::Reason::kBadRequest, {"unknown field number 9", "LocalSubjectAccessReview"});
}

// ---- Tables derived from annotated schemas. ----

Json Schemas(std::string_view yaml) {
  auto parsed = machinery::ParseYaml(yaml);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : Json::object();
}

constexpr std::string_view kWidgetSchemas = R"(
example.v1.Widget:
  type: object
  properties:
    apiVersion: {type: string}
    kind: {type: string}
    metadata:
      allOf: [{$ref: '#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Time'}]
      x-klutch-protobuf: 1
    size:
      type: integer
      format: int32
      x-klutch-protobuf: '2,ptr'
    tags:
      type: array
      items: {type: string}
      x-klutch-protobuf: 3
    limits:
      type: object
      additionalProperties:
        allOf: [{$ref: '#/components/schemas/io.k8s.apimachinery.pkg.api.resource.Quantity'}]
      x-klutch-protobuf: 4
    part:
      allOf: [{$ref: '#/components/schemas/example.v1.Part'}]
      x-klutch-protobuf: 5
    secret:
      type: string
      format: byte
      x-klutch-protobuf: 6
    ignored:
      type: string
      x-klutch-protobuf: none
  x-kubernetes-group-version-kind:
    - {group: example.com, version: v1, kind: Widget}
example.v1.Part:
  type: object
  x-klutch-protobuf-embedded: {1: Label}
  properties:
    name:
      type: string
      x-klutch-protobuf: '1.1'
    port:
      allOf: [{$ref: '#/components/schemas/io.k8s.apimachinery.pkg.util.intstr.IntOrString'}]
      x-klutch-protobuf: 2
    owner:
      type: string
      x-klutch-protobuf: '3,always'
io.k8s.apimachinery.pkg.apis.meta.v1.Time: {type: string, format: date-time}
io.k8s.apimachinery.pkg.api.resource.Quantity: {type: string}
io.k8s.apimachinery.pkg.util.intstr.IntOrString: {x-kubernetes-int-or-string: true}
)";

// Every rule of the derivation at once: a pointer zero kept, a repeated string, a map of
// quantities, a nested message with an embedded struct, an always-emitted string, bytes, a
// well-known type, and a property left out on purpose.
TEST(ProtobufTypes, DerivesMessagesFromAnnotatedSchemas) {
  auto types = ProtobufTypes::Derive(Schemas(kWidgetSchemas));
  ASSERT_TRUE(types.ok()) << types.status().ToString();
  const ProtobufTypes& t = **types;
  EXPECT_EQ(t.Kinds(),
            (std::vector<std::pair<std::string, std::string>>{{"example.com/v1", "Widget"}}));
  EXPECT_EQ(t.SchemaFor("example.com/v1", "Widget"), "example.v1.Widget");
  EXPECT_EQ(t.SchemaFor("example.com/v2", "Widget"), "");
  std::string raw = Bytes(1, TimeMsg(1700000000, 0)) + Varint(2, 0) + Bytes(3, "a") + Bytes(3, "") +
                    Bytes(4, Entry("cpu", Bytes(1, "1"))) +
                    Bytes(5, Bytes(1, Bytes(1, "x")) + Bytes(2, IntOrStr(80))) + Bytes(6, "\x01");
  ExpectJson(t.Decode(Envelope("example.com/v1", "Widget", raw), {}),
             R"({"apiVersion":"example.com/v1","kind":"Widget",
                 "metadata":"2023-11-14T22:13:20Z","size":0,"tags":["a",""],
                 "limits":{"cpu":"1"},"part":{"name":"x","port":80,"owner":""},
                 "secret":"AQ=="})");
  // The property annotated "none" has no field number: 7 is unknown, and so is 2 in the
  // embedded struct, which the error names.
  ExpectError(t.Decode(Envelope("example.com/v1", "Widget", Bytes(7, "x")), {}),
              core::Reason::kBadRequest, {"unknown field number 7", "in message Widget"});
  ExpectError(t.Decode(Envelope("example.com/v1", "Widget", Bytes(5, Bytes(1, Varint(2, 1)))), {}),
              core::Reason::kBadRequest, {"part", "unknown field number 2", "in message Label"});
}

TEST(ProtobufTypes, DerivationNamesTheDefinitionAndPropertyItCannotUse) {
  struct Case {
    std::string from, to;  // replaced in kWidgetSchemas
    std::string problem;
  };
  const Case cases[] = {
      {"      x-klutch-protobuf: 3\n", "", "example.v1.Widget.tags: no x-klutch-protobuf"},
      {"'2,ptr'", "'2,pointer'", "example.v1.Widget.size: unknown flag \"pointer\""},
      {"'2,ptr'", "2.5", "example.v1.Widget.size: expected a field number or a string"},
      {"'2,ptr'", "0", "example.v1.Widget.size: field number 0 out of range"},
      {"'1.1'", "'2.1'", "example.v1.Part.name: field 2 is not declared"},
      {"      x-klutch-protobuf: 6\n", "      x-klutch-protobuf: 5\n",
       "example.v1.Widget: field number 5 used twice"},
      {"      format: byte\n", "      format: date-time\n",
       "example.v1.Widget.secret: a date-time string must refer to meta/v1 Time"},
      {"      type: string\n      x-klutch-protobuf: '3,always'",
       "      type: object\n      x-klutch-protobuf: 3",
       "example.v1.Part.owner: objects must be maps"},
      {"'#/components/schemas/example.v1.Part'", "'#/components/schemas/example.v1.Missing'",
       "example.v1.Missing: no such definition"},
      {"      x-klutch-protobuf: '1.1'\n", "      x-klutch-protobuf: 4\n",
       "example.v1.Part: embedded field 1 has no properties"},
  };
  for (const Case& c : cases) {
    std::string yaml(kWidgetSchemas);
    size_t at = yaml.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    yaml.replace(at, c.from.size(), c.to);
    auto types = ProtobufTypes::Derive(Schemas(yaml));
    ASSERT_FALSE(types.ok()) << c.problem;
    EXPECT_EQ(types.status().reason(), core::Reason::kInvalid);
    EXPECT_NE(types.status().message().find(c.problem), std::string::npos)
        << types.status().message();
  }
}

// The built-in tables come from the built-in schemas: each decodable kind from the definition
// that declares it.
TEST(ProtobufTypes, BuiltinKindsAreDerivedFromTheSchemaDeclaringThem) {
  const ProtobufTypes& t = ProtobufTypes::Builtin();
  for (const auto& [api_version, kind] : t.Kinds()) {
    std::string schema = t.SchemaFor(api_version, kind);
    if (api_version == "*") {
      EXPECT_EQ(schema, "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions");
      continue;
    }
    size_t slash = api_version.find('/');
    std::string group = slash == std::string::npos ? "" : api_version.substr(0, slash);
    std::string version = api_version.substr(slash == std::string::npos ? 0 : slash + 1);
    EXPECT_EQ(apis::SchemaNameFor(group, version, kind), schema) << api_version << " " << kind;
  }
  EXPECT_EQ(t.SchemaFor("v1", "ResourceQuota"), "io.k8s.api.core.v1.ResourceQuota");
  EXPECT_EQ(t.SchemaFor("v1", "LimitRange"), "");
  EXPECT_EQ(t.SchemaFor("apps/v1", "DeleteOptions"),
            "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions");
}

// ---- Malformed input. ----

TEST(DecodeKubernetesProtobuf, RejectsBadMagicAndEnvelopeProblems) {
  ExpectError(DecodeKubernetesProtobuf(""), core::Reason::kBadRequest, {"magic"});
  ExpectError(DecodeKubernetesProtobuf("{\"kind\":\"ConfigMap\"}"), core::Reason::kBadRequest,
              {"magic"});
  const std::string body = HexDecode(kCreateConfigMap);
  std::string bad_magic = body;
  bad_magic[3] = '\x01';
  ExpectError(DecodeKubernetesProtobuf(bad_magic), core::Reason::kBadRequest, {"magic"});
  ExpectError(DecodeKubernetesProtobuf(std::string("k8s\0", 4) + Bytes(2, "")),
              core::Reason::kBadRequest, {"Kind"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", "") + Bytes(5, "x")),
              core::Reason::kBadRequest, {"envelope", "unknown field number 5"});
  // The envelope says raw has 0x39 bytes; cut it short.
  ExpectError(DecodeKubernetesProtobuf(body.substr(0, 30)), core::Reason::kBadRequest,
              {"envelope", "truncated"});
}

TEST(DecodeKubernetesProtobuf, RejectsUnsupportedEncodingAndContentType) {
  std::string head = std::string("k8s\0", 4) + Bytes(1, Bytes(1, "v1") + Bytes(2, "ConfigMap"));
  ExpectError(DecodeKubernetesProtobuf(head + Bytes(2, "") + Bytes(3, "gzip")),
              core::Reason::kUnsupportedMediaType, {"contentEncoding", "gzip"});
  ExpectError(DecodeKubernetesProtobuf(head + Bytes(2, "") + Bytes(4, "application/json")),
              core::Reason::kUnsupportedMediaType, {"contentType", "application/json"});
  EXPECT_TRUE(
      DecodeKubernetesProtobuf(head + Bytes(4, std::string(kKubernetesProtobufContentType))).ok());
}

TEST(DecodeKubernetesProtobuf, UnknownKindIsUnsupportedMediaType) {
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "Pod", "")),
              core::Reason::kUnsupportedMediaType, {"\"v1\"", "\"Pod\""});
  ExpectError(DecodeKubernetesProtobuf(Envelope("example.com/v1", "Widget", "")),
              core::Reason::kUnsupportedMediaType, {"\"example.com/v1\"", "\"Widget\""});
  ExpectError(DecodeKubernetesProtobuf(Envelope("apps/v1beta1", "Deployment", "")),
              core::Reason::kUnsupportedMediaType, {"apps/v1beta1"});
}

TEST(DecodeKubernetesProtobuf, TruncatedFieldNamesItsPath) {
  // metadata.labels (field 11) declares 16 bytes but 3 follow.
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap",
                                                Bytes(1,
                                                      "\x5a\x10"
                                                      "abc"))),
              core::Reason::kBadRequest,
              {"v1 ConfigMap", "metadata.labels", "truncated", "declares 16 bytes, 3 remain"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", "\x0a\x20short")),
              core::Reason::kBadRequest, {"metadata", "truncated"});
  // A key cut inside its varint.
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", "\x80")),
              core::Reason::kBadRequest, {"varint"});
}

TEST(DecodeKubernetesProtobuf, BadVarintNamesItsPath) {
  std::string overlong(1, '\x38');  // generation, then an 11-byte varint
  overlong.append(10, '\xff').push_back('\x01');
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, overlong))),
              core::Reason::kBadRequest, {"metadata.generation", "varint"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, "\x38\x80"))),
              core::Reason::kBadRequest, {"metadata.generation", "varint"});
}

TEST(DecodeKubernetesProtobuf, UnknownFieldNumberNamesMessageAndNumber) {
  // ObjectMeta 15 (clusterName) was removed from Kubernetes.
  ExpectError(DecodeKubernetesProtobuf(
                  Envelope("v1", "ConfigMap", Bytes(1, Bytes(1, "x") + Bytes(15, "c")))),
              core::Reason::kBadRequest, {"metadata", "unknown field number 15", "ObjectMeta"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Varint(9, 1))),
              core::Reason::kBadRequest, {"unknown field number 9", "ConfigMap"});
  // PodSpec 34 (ephemeralContainers) is deliberately not modelled.
  std::string spec = Bytes(3, Bytes(2, Bytes(34, Bytes(2, "debug"))));
  ExpectError(DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", Bytes(2, spec))),
              core::Reason::kBadRequest,
              {"spec.template.spec", "unknown field number 34", "PodSpec"});
  ExpectError(DecodeKubernetesProtobuf(
                  Envelope("v1", "Service", Bytes(2, Bytes(1, Bytes(4, Varint(7, 1)))))),
              core::Reason::kBadRequest,
              {"spec.ports[0].targetPort", "unknown field number 7", "IntOrString"});
}

TEST(DecodeKubernetesProtobuf, WrongWireTypeNamesTheField) {
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, Varint(1, 5)))),
              core::Reason::kBadRequest, {"metadata.name", "wrong wire type 0"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, Varint(11, 1)))),
              core::Reason::kBadRequest, {"metadata.labels", "wrong wire type"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(4, "yes"))),
              core::Reason::kBadRequest, {"immutable", "wrong wire type 2"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Key(1, 3))),
              core::Reason::kBadRequest, {"metadata", "wire type 3"});
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Key(1, 1) + "12345678")),
              core::Reason::kBadRequest, {"metadata", "wrong wire type 1"});
}

TEST(DecodeKubernetesProtobuf, NestingDeeperThanTheLimitIsRejected) {
  std::string raw = Bytes(2, Bytes(3, Bytes(2, Bytes(2, Bytes(1, "c")))));
  std::string body = Envelope("apps/v1", "Deployment", raw);
  EXPECT_TRUE(DecodeKubernetesProtobuf(body).ok());
  ExpectError(DecodeKubernetesProtobuf(body, ProtobufDecodeOptions{.max_depth = 3}),
              core::Reason::kBadRequest, {"spec.template.spec", "deeper than 3"});
}

TEST(DecodeKubernetesProtobuf, RejectsInvalidValues) {
  ExpectError(DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, Bytes(1, "\xff")))),
              core::Reason::kBadRequest, {"metadata.name", "UTF-8"});
  ExpectError(
      DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(2, Entry("\xc0\xaf", "")))),
      core::Reason::kBadRequest, {"data", "UTF-8"});
  std::string strategy = Bytes(2, Bytes(1, Varint(1, 2) + Varint(2, 1)));
  ExpectError(
      DecodeKubernetesProtobuf(Envelope("apps/v1", "Deployment", Bytes(2, Bytes(4, strategy)))),
      core::Reason::kBadRequest,
      {"spec.strategy.rollingUpdate.maxUnavailable", "IntOrString type"});
  auto fields_v1 = [](std::string_view raw_json) {
    std::string managed = Bytes(7, Bytes(1, raw_json));
    return DecodeKubernetesProtobuf(Envelope("v1", "ConfigMap", Bytes(1, Bytes(17, managed))));
  };
  ExpectError(fields_v1("{\"f:data\":"), core::Reason::kBadRequest,
              {"metadata.managedFields[0].fieldsV1", "invalid JSON"});
  ExpectError(fields_v1("[1]"), core::Reason::kBadRequest, {"fieldsV1", "JSON object"});
  ExpectError(fields_v1(std::string(200, '[') + std::string(200, ']')), core::Reason::kBadRequest,
              {"fieldsV1", "nested deeper"});
}

// Every prefix and every single-byte corruption of real bodies gives a value or a Status.
TEST(DecodeKubernetesProtobuf, SurvivesTruncationAndCorruptionOfRealBodies) {
  for (std::string_view hex :
       {kCreateConfigMap, kCreateRoleBinding, kAuthCanIGetConfigMapWeb, kCreateTokenWithAudience}) {
    std::string body = HexDecode(hex);
    int failures = 0;
    for (size_t n = 0; n < body.size(); ++n) {
      auto got = DecodeKubernetesProtobuf(body.substr(0, n));
      if (!got.ok()) {
        ++failures;
        EXPECT_EQ(got.status().reason(), core::Reason::kBadRequest) << got.status().ToString();
      }
    }
    EXPECT_GT(failures, static_cast<int>(body.size()) / 2);
    for (size_t i = 0; i < body.size(); ++i) {
      for (int bit = 0; bit < 8; ++bit) {
        std::string mutated = body;
        mutated[i] = static_cast<char>(mutated[i] ^ (1 << bit));
        auto got = DecodeKubernetesProtobuf(mutated);
        if (!got.ok()) {
          EXPECT_TRUE(got.status().reason() == core::Reason::kBadRequest ||
                      got.status().reason() == core::Reason::kUnsupportedMediaType)
              << got.status().ToString();
        }
      }
    }
  }
}

}  // namespace
}  // namespace klutch::codec::protobuf_test
