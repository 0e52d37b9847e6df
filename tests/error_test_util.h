// Bad-input tests: run `f` and require an exception of type Exc whose message contains every one of
// `words` (any other exception, or none, is a failure).
#pragma once
#include <gtest/gtest.h>

#include <exception>
#include <functional>
#include <initializer_list>
#include <string>

namespace vitrt::test {

template <class Exc>
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> words) {
  try {
    f();
    ADD_FAILURE() << "no exception thrown";
  } catch (const Exc& e) {
    const std::string msg = e.what();
    for (const char* w : words) EXPECT_NE(msg.find(w), std::string::npos) << "'" << w << "' not in: " << msg;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

}  // namespace vitrt::test
