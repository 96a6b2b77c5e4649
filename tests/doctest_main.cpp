// The one main() of every doctest executable.
//
// CTest runs each test case alone (doctest_discover_tests: --test-case=NAME). A name CTest cannot carry — one
// with a ';', which CMake takes for a list separator — would select no test case, and doctest counts a run of
// nothing as a success. So a run with a --test-case filter that ran no test case fails, saying why.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>

namespace {

int g_test_cases_run = 0;

struct CountingListener : doctest::IReporter {
  explicit CountingListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { ++g_test_cases_run; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

REGISTER_LISTENER("count", 1, CountingListener);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int status = context.run();
  if (context.shouldExit()) return status;
  bool filtered = false;
  for (int i = 1; i < argc; ++i) {
    filtered =
        filtered || std::strncmp(argv[i], "--test-case=", 12) == 0 || std::strncmp(argv[i], "-tc=", 4) == 0;
  }
  if (status == 0 && filtered && g_test_cases_run == 0) {
    std::fprintf(
        stderr,
        "no test case matched the --test-case filter: a name with ';' is cut in two by CTest; rename it\n");
    return 1;
  }
  return status;
}
