// What a plugin hands back is checked before it is read: null lists with counts, null strings with
// sizes, absurd counts, null handles. Each case comes from a fault-plugin variant and must be an error
// value naming the plugin and the function, never a crash.
#include "plugin/plugin.h"
#include "runtime/client.h"
#include "test_env.h"

namespace plugboard {
namespace {

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

struct AttributeFault {
  const char* name;
  const char* path;
  const char* expect;  // in the message
};

class AttributeFaultTest : public ::testing::TestWithParam<AttributeFault> {};

TEST_P(AttributeFaultTest, IsAnErrorNamingThePluginAndTheFunction) {
  const AttributeFault& f = GetParam();
  auto r = load_plugin(f.path);
  ASSERT_FALSE(r) << f.name << " was accepted";
  EXPECT_EQ(r.error().code(), Code::kInternal) << r.error().to_string();
  const std::string m = r.error().message();
  EXPECT_TRUE(contains(m, std::filesystem::path(f.path).filename().string())) << m;
  EXPECT_TRUE(contains(m, "PJRT_Plugin_Attributes handed back")) << m;
  EXPECT_TRUE(contains(m, f.expect)) << m;
  EXPECT_TRUE(contains(r.error().to_string(), "reading the attributes of")) << r.error().to_string();
}

INSTANTIATE_TEST_SUITE_P(
    FaultPlugins, AttributeFaultTest,
    ::testing::Values(
        AttributeFault{"null_attributes", PLUGBOARD_FIXTURE_FAULT_NULL_ATTRIBUTES, "a null attributes with a count of 3"},
        AttributeFault{"null_name", PLUGBOARD_FIXTURE_FAULT_NULL_ATTRIBUTE_NAME, "a null attribute 0 name with a size of 10"},
        AttributeFault{"null_string", PLUGBOARD_FIXTURE_FAULT_NULL_ATTRIBUTE_STRING,
                       "a null attribute 0 (fault_mode) string value with a size of 22"},
        AttributeFault{"null_list", PLUGBOARD_FIXTURE_FAULT_NULL_ATTRIBUTE_LIST,
                       "a null attribute 0 (fault_mode) int64 list with a count of 4"},
        AttributeFault{"many_attributes", PLUGBOARD_FIXTURE_FAULT_MANY_ATTRIBUTES,
                       "attributes with a count of 1099511627776"}),
    [](const auto& info) { return std::string(info.param.name); });

struct DeviceFault {
  const char* fault;
  const char* expect;
};

class DeviceFaultTest : public ::testing::TestWithParam<DeviceFault> {};

TEST_P(DeviceFaultTest, ClientCreationIsAnErrorNamingThePluginAndTheFunction) {
  auto plugin = load_plugin(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  PB_ASSERT_OK(plugin);
  ClientOptions options;
  options.create_options.push_back({"fault", std::string(GetParam().fault)});
  auto client = Client::create(*plugin, options);
  ASSERT_FALSE(client) << GetParam().fault << " was accepted";
  EXPECT_EQ(client.error().code(), Code::kInternal) << client.error().to_string();
  const std::string m = client.error().message();
  EXPECT_TRUE(contains(m, "fault_well_formed")) << m;
  EXPECT_TRUE(contains(m, GetParam().expect)) << m;
}

INSTANTIATE_TEST_SUITE_P(
    FaultPlugin, DeviceFaultTest,
    ::testing::Values(
        DeviceFault{"null_devices", "PJRT_Client_AddressableDevices handed back a null addressable_devices with a count of 2"},
        DeviceFault{"null_device", "PJRT_Client_AddressableDevices handed back a null device 0"},
        DeviceFault{"many_devices", "PJRT_Client_AddressableDevices handed back addressable_devices with a count of 1099511627776"},
        DeviceFault{"null_description", "PJRT_Device_GetDescription handed back a null device_description"}),
    [](const auto& info) { return std::string(info.param.fault); });

TEST(PluginOutputTest, WellBehavedFaultPluginStillMakesAClient) {
  auto plugin = load_plugin(PLUGBOARD_FIXTURE_FAULT_WELL_FORMED);
  PB_ASSERT_OK(plugin);
  auto client = Client::create(*plugin);
  PB_ASSERT_OK(client);
  EXPECT_EQ((*client)->devices().size(), 1u);
}

}  // namespace
}  // namespace plugboard
