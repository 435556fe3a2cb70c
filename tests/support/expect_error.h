#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "tern/core/error.h"

namespace tern::testing {

// Expects `fn` to throw tern::Error whose message contains every one of `parts`.
template <typename Fn>
void expect_error(Fn fn, std::initializer_list<std::string> parts) {
  try {
    fn();
    ADD_FAILURE() << "expected tern::Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

}  // namespace tern::testing
