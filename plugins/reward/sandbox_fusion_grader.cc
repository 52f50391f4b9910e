// verl's sandbox_fusion reward (see sandbox_fusion_grader.h): compute_score's
// code extraction and test-case parsing, check_correctness's per-case requests
// and result codes, call_sandbox_api's payload, timeouts and 504 retries.
#include "sandbox_fusion_grader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <thread>
#include <utility>

#include "common/http/http_json_client.h"
#include "python_str.h"
#include "python_unicode.h"
#include "rlcore/error.h"

namespace rlcore::reward {
namespace {

using ordered_json = nlohmann::ordered_json;

constexpr std::string_view kSandboxGrader = "sandbox_fusion";
constexpr std::size_t kContinuousCases = 10;  // compute_score(continuous=True): the first 10 cases
constexpr int kMaxAttempts = 3;               // verl's MAX_RETRIES (only a 504 is retried)

// verl's wrapper for test cases with an "fn_name" (LeetCode-style: call the
// function with one JSON argument per stdin line, print the result), verbatim:
// head + code + middle + fn_name + tail.
constexpr std::string_view kWrapperHead = R"PY(
import traceback
from string import *
from re import *
from datetime import *
from collections import *
from heapq import *
from bisect import *
from copy import *
from math import *
from random import *
from statistics import *
from itertools import *
from functools import *
from operator import *
from io import *
from sys import *
from json import *
from builtins import *
from typing import *
import string
import re
import datetime
import collections
import heapq
import bisect
import copy
import math
import random
import statistics
import itertools
import functools
import operator
import io
import sys
import json

# === User's Original Code START ===
)PY";
constexpr std::string_view kWrapperMiddle = R"PY(
# === User's Original Code END ===

_SANDBOX_FN_NAME = ")PY";
constexpr std::string_view kWrapperTail = R"PY("

def _execute_user_function():
    # --- Input Parsing ---
    _raw_input_str = sys.stdin.read()
    _args = []
    if _raw_input_str.strip(): # If there's input
        try:
            _args = [json.loads(line) for line in _raw_input_str.split('\n')]
        except json.JSONDecodeError as _je:
            sys.stderr.write(f"WrapperError: Invalid JSON input for '{_SANDBOX_FN_NAME}': {_je}\nInput was: "
                              f"{_raw_input_str[:200]}\n")
            return None, True # result, error_occurred

    # --- Function Location and Execution ---
    try:
        _target_callable = None
        # Try global scope first
        if _SANDBOX_FN_NAME in globals():
            _target_callable = globals()[_SANDBOX_FN_NAME]
        # Else, if 'Solution' class exists, try to get its method
        elif 'Solution' in globals():
            _Solution_class = globals()['Solution']
            # Attempt to instantiate and get method.
            # Errors (e.g., Solution not a class, instantiation fails, method missing)
            # will be caught by the broad except block below.
            _solution_instance = _Solution_class()
            _target_callable = getattr(_solution_instance, _SANDBOX_FN_NAME)

        if not _target_callable:
            sys.stderr.write(f"WrapperError: Function or method '{_SANDBOX_FN_NAME}' not found.\n")
            return None, True # result, error_occurred

        _fn_result = _target_callable(*_args)
        return _fn_result, False # result, no_error
    except Exception: # Catches errors from Solution instantiation, getattr, or function call
        sys.stderr.write(f"Error during setup or execution of '{_SANDBOX_FN_NAME}':\n{traceback.format_exc()}\n")
        return None, True # result, error_occurred

if __name__ == '__main__':
    _result, _error_occurred = _execute_user_function()

    if not _error_occurred:
        # Serialize result to stdout
        if isinstance(_result, (dict, list, tuple)) or _result is None or isinstance(_result, bool):
            print(json.dumps(_result))
        elif isinstance(_result, (int, float, str)):
            print(str(_result)) # Ensure string conversion for print
        else:
            # For other types, default to string representation.
            print(str(_result))
    # Optional: To explicitly exit with an error code if the sandbox relies on it
    # else:
    #    sys.exit(1)
)PY";

// Python truthiness of a JSON value.
template <class Json>
bool truthy(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return false;
    case Json::value_t::boolean:
      return value.template get<bool>();
    case Json::value_t::string:
      return !value.template get_ref<const std::string&>().empty();
    case Json::value_t::array:
    case Json::value_t::object:
      return !value.empty();
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
    case Json::value_t::number_float:
      return value.template get<double>() != 0.0;
    default:
      return true;
  }
}

// `value == 0` in Python (False and 0.0 are equal to 0, None and "0" are not).
bool equals_zero(const nlohmann::json& value) {
  if (value.is_boolean()) return !value.get<bool>();
  return value.is_number() && value.get<double>() == 0.0;
}

bool is_string(const nlohmann::json& value, std::string_view text) { return value.is_string() && value == text; }

nlohmann::json field(const nlohmann::json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nlohmann::json() : *it;
}

std::string python_repr_string(std::string_view text) {
  const bool double_quotes = contains(text, "'") && !contains(text, "\"");
  const char quote = double_quotes ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (byte < 0x20 || byte == 0x7F) {
      static constexpr char kHex[] = "0123456789abcdef";
      out.append("\\x").push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

template <class Json>
std::string python_repr(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "None";
    case Json::value_t::boolean:
      return value.template get<bool>() ? "True" : "False";
    case Json::value_t::string:
      return python_repr_string(value.template get_ref<const std::string&>());
    case Json::value_t::array: {
      std::string out = "[";
      for (std::size_t i = 0; i < value.size(); ++i) out.append(i ? ", " : "").append(python_repr(value[i]));
      return out + "]";
    }
    case Json::value_t::object: {
      std::string out = "{";
      bool first = true;
      for (const auto& [key, item] : value.items()) {
        out.append(first ? "" : ", ").append(python_repr_string(key)).append(": ").append(python_repr(item));
        first = false;
      }
      return out + "}";
    }
    default:
      return value.dump();  // numbers: the same shortest round-trip digits as Python's repr
  }
}

std::string_view rstrip_newlines(std::string_view text) {
  while (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  return text;
}

bool is_ascii_alpha_word(std::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); });
}

// One request of a batch: test case `index` of sample `sample`.
struct CaseJob {
  std::size_t sample = 0;
  std::size_t index = 0;
  std::string code;
  std::optional<std::string> stdin_text;
  ordered_json expected;
};

// What compute_score decided for one sample before any request.
struct SamplePlan {
  std::vector<CaseResult> results;  // one per considered test case
  std::vector<std::size_t> jobs;    // indices into the batch's jobs, one per result still to ask
};

// compute_score and check_correctness up to the requests: the jobs to run for
// one sample, or a plan without results (score 0) where verl returns early.
SamplePlan plan_sample(std::size_t sample, std::string_view response, std::string_view ground_truth, bool continuous,
                       std::vector<CaseJob>& jobs) {
  SamplePlan plan;
  const std::optional<std::string> code = extract_code(response);
  if (!code) return plan;  // "Invalid completion (missing code block)"
  ordered_json cases = http::parse_json_bounded<ordered_json>(ground_truth);
  if (cases.is_discarded() || !cases.is_object()) return plan;  // not JSON, or json.loads gave no dict

  const bool has_asserts = cases.contains("assert_case");
  if (has_asserts && cases["assert_case"].is_array()) {
    const std::size_t asserts = cases["assert_case"].size();
    if (!cases.contains("inputs")) cases["inputs"] = ordered_json(std::vector<std::string>(asserts));
    if (!cases.contains("outputs")) cases["outputs"] = ordered_json(std::vector<std::nullptr_t>(asserts));
  } else if (!cases.contains("inputs") || !cases.contains("outputs")) {
    return plan;  // "Invalid test_cases structure"
  }
  const ordered_json& inputs = cases["inputs"];
  const ordered_json& outputs = cases["outputs"];
  if (!inputs.is_array() || !outputs.is_array() || inputs.empty()) return plan;

  const std::size_t count = inputs.size();
  const std::size_t considered = continuous ? std::min(count, kContinuousCases) : count;
  const ordered_json asserts = has_asserts ? cases["assert_case"] : ordered_json(std::vector<std::string>(count));
  if (outputs.size() != count || !asserts.is_array() || asserts.size() != count) {
    plan.results.assign(considered, CaseResult::kApiError);  // verl: [-1] * num_cases
    return plan;
  }
  const ordered_json fn_name = cases.contains("fn_name") ? cases["fn_name"] : ordered_json();
  plan.results.assign(considered, CaseResult::kApiError);
  for (std::size_t i = 0; i < considered; ++i) {
    if (!asserts[i].is_string()) continue;  // str + non-str raises in verl: -1
    CaseJob job;
    job.sample = sample;
    job.index = i;
    job.code = *code + "\n\n" + asserts[i].get<std::string>();
    if (truthy(fn_name)) {
      const std::string name = python_str_of(fn_name);
      job.code = std::string(kWrapperHead) + job.code + std::string(kWrapperMiddle) + name + std::string(kWrapperTail);
    }
    if (!inputs[i].is_null()) job.stdin_text = python_str_of(inputs[i]);
    job.expected = outputs[i];
    plan.jobs.push_back(jobs.size());
    jobs.push_back(std::move(job));
  }
  return plan;
}

// check_correctness's post-processing (every case after the first compile error
// is one too), then compute_score's pass rate.
double pass_rate(std::vector<CaseResult> results) {
  if (results.empty()) return 0.0;
  const auto compile_error = std::find(results.begin(), results.end(), CaseResult::kCompileError);
  std::fill(compile_error, results.end(), CaseResult::kCompileError);
  const auto passed = std::count(results.begin(), results.end(), CaseResult::kPassed);
  return static_cast<double>(passed) / static_cast<double>(results.size());
}

// verl sends its int timeouts as JSON integers; so do we when the value is whole.
nlohmann::json timeout_json_number(double seconds) {
  if (seconds == std::floor(seconds) && seconds < 1e15) return static_cast<int64_t>(seconds);
  return seconds;
}

}  // namespace

std::optional<std::string> extract_code(std::string_view completion) {
  if (contains(completion, "```python")) {
    const std::string_view after = split(completion, "```python").back();
    return std::string(split(after, "```").front());
  }
  if (!contains(completion, "```")) return std::nullopt;
  std::string_view solution = split(completion, "```")[1];
  if (const std::size_t newline = solution.find('\n'); newline != std::string_view::npos) {
    // A language line ("cpp", "Python") is dropped; verl's isalpha() is Unicode, this is ASCII.
    if (is_ascii_alpha_word(python_strip(solution.substr(0, newline)))) solution = solution.substr(newline + 1);
  }
  return std::string(solution);
}

std::string python_str_of(const nlohmann::ordered_json& value) {
  return value.is_string() ? value.get<std::string>() : python_repr(value);
}

CaseResult classify_sandbox_reply(const nlohmann::json& reply, const nlohmann::ordered_json& expected_output) {
  if (!truthy(reply) || !reply.is_object()) return CaseResult::kApiError;  // "unknown_api_state" or no .get
  const nlohmann::json status = field(reply, "status");
  const nlohmann::json compile = field(reply, "compile_result");
  const nlohmann::json run = field(reply, "run_result");
  // verl reads both with .get() before looking at the status: anything truthy but a dict raises.
  if ((truthy(compile) && !compile.is_object()) || (truthy(run) && !run.is_object())) return CaseResult::kApiError;
  const nlohmann::json compile_status = truthy(compile) ? field(compile, "status") : nlohmann::json();
  const nlohmann::json run_status = truthy(run) ? field(run, "status") : nlohmann::json();

  if (is_string(status, "Failed")) {
    const bool compile_error =
        truthy(compile) && (is_string(compile_status, "Error") || is_string(compile_status, "TimeLimitExceeded") ||
                            (is_string(compile_status, "Finished") && !equals_zero(field(compile, "return_code"))));
    if (compile_error) return CaseResult::kCompileError;
    if (!truthy(run)) return CaseResult::kApiError;
    if (is_string(run_status, "TimeLimitExceeded")) return CaseResult::kTimeLimit;
    if (is_string(run_status, "Error") ||
        (is_string(run_status, "Finished") && !equals_zero(field(run, "return_code")))) {
      return CaseResult::kRuntimeError;
    }
    return CaseResult::kApiError;
  }
  if (is_string(status, "Success")) {
    if (!truthy(run) || !is_string(run_status, "Finished")) return CaseResult::kApiError;
    if (expected_output.is_null()) return CaseResult::kPassed;
    const nlohmann::json stdout_value = field(run, "stdout");
    const std::string actual = stdout_value.is_null()     ? std::string()
                               : stdout_value.is_string() ? stdout_value.get<std::string>()
                                                          : python_repr(stdout_value);
    const std::string expected = python_str_of(expected_output);
    return rstrip_newlines(actual) == rstrip_newlines(expected) ? CaseResult::kPassed : CaseResult::kWrongAnswer;
  }
  return CaseResult::kApiError;  // "SandboxError" or an unknown status
}

SandboxFusionGrader::SandboxFusionGrader(SandboxFusionOptions options) : options_(std::move(options)) {
  if (options_.url.empty()) return;
  const std::size_t scheme = options_.url.find("://");
  const std::size_t path = scheme == std::string::npos ? std::string::npos : options_.url.find('/', scheme + 3);
  base_url_ = options_.url.substr(0, path);
  path_ = path == std::string::npos ? "/" : options_.url.substr(path);
  http::HttpSettings settings;
  settings.base_url = base_url_;
  settings.client_name = std::string(kSandboxGrader);
  http::HttpJsonClient check(settings);  // ConfigError naming a malformed url now, not at the first batch
}

GradeResult SandboxFusionGrader::grade(std::string_view response, std::string_view ground_truth,
                                       std::string_view data_source, const nlohmann::json& extra) const {
  return grade_batch({GradeRequest{response, ground_truth, data_source, &extra}}).front();
}

std::vector<GradeResult> SandboxFusionGrader::grade_batch(const std::vector<GradeRequest>& requests) const {
  if (options_.url.empty()) {
    throw ConfigError(
        "grader sandbox_fusion needs reward.graders.sandbox_fusion.url (verl's "
        "reward_model.sandbox_fusion.url), e.g. http://localhost:8080/run_code");
  }
  std::vector<CaseJob> jobs;
  std::vector<SamplePlan> plans;
  plans.reserve(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    plans.push_back(plan_sample(i, requests[i].response, requests[i].ground_truth, options_.continuous, jobs));
  }

  http::HttpSettings settings;
  settings.base_url = base_url_;
  settings.client_name = std::string(kSandboxGrader);
  const double request_timeout_s = 2 * options_.timeout_s + options_.api_timeout_s;
  settings.connect_timeout_s = request_timeout_s;
  settings.request_timeout_s = request_timeout_s;
  settings.max_retries = 0;
  const http::HttpJsonClient client(settings);
  const nlohmann::json timeout = timeout_json_number(options_.timeout_s);

  // One outcome per job: a result, or (api_errors: raise) why the sandbox could not be asked.
  std::vector<CaseResult> results(jobs.size(), CaseResult::kApiError);
  std::vector<std::exception_ptr> failures(jobs.size());
  const auto ask = [&](const CaseJob& job) -> CaseResult {
    nlohmann::json body;
    body["compile_timeout"] = timeout;
    body["run_timeout"] = timeout;
    body["code"] = job.code;
    body["stdin"] = job.stdin_text ? nlohmann::json(*job.stdin_text) : nlohmann::json();
    body["memory_limit_MB"] = options_.memory_limit_mb;
    body["language"] = "python";
    body["files"] = nlohmann::json::object();
    body["fetch_files"] = nlohmann::json::array();
    for (int attempt = 1;; ++attempt) {
      const http::HttpReply reply = client.post(path_, body, http::Retry::kNo, request_timeout_s);
      if (reply.status == 504 && attempt < kMaxAttempts) {
        std::this_thread::sleep_for(std::chrono::duration<double>(options_.retry_delay_s * attempt));
        continue;
      }
      if (reply.status < 200 || reply.status >= 300) {
        throw IoError(std::string(kSandboxGrader) + ": " + client.describe("POST", path_, reply) +
                      (reply.status == 504 ? " (after " + std::to_string(kMaxAttempts) + " attempts)" : ""));
      }
      if (!reply.json.is_object()) {
        std::string quoted = reply.body.substr(0, 200);
        if (reply.body.size() > 200) quoted += "...";
        throw FormatError(std::string(kSandboxGrader) + ": POST " + options_.url + " answered HTTP " +
                          std::to_string(reply.status) + " with " +
                          (reply.json.is_null() ? "a body that is not JSON" : "JSON that is not an object") + ": " +
                          (quoted.empty() ? "(empty body)" : quoted));
      }
      return classify_sandbox_reply(reply.json, job.expected);
    }
  };

  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t j; (j = next.fetch_add(1)) < jobs.size();) {
      try {
        results[j] = ask(jobs[j]);
      } catch (const std::exception&) {
        if (options_.api_errors == SandboxApiErrors::kRaise) failures[j] = std::current_exception();
        results[j] = CaseResult::kApiError;
      }
    }
  };
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(options_.max_concurrent), jobs.size());
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < workers; ++t) threads.emplace_back(worker);
  for (std::thread& thread : threads) thread.join();

  for (std::size_t j = 0; j < jobs.size(); ++j) {
    if (!failures[j]) continue;
    try {
      std::rethrow_exception(failures[j]);
    } catch (const std::exception& e) {
      throw IoError(
          "grader sandbox_fusion, sample " + std::to_string(jobs[j].sample) + " of the batch, test case " +
          std::to_string(jobs[j].index) + ": " + e.what() +
          " (reward.graders.sandbox_fusion.api_errors: fail_case scores such a case as failed, as verl does)");
    }
  }

  std::vector<GradeResult> graded(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    SamplePlan& plan = plans[i];
    for (std::size_t k = 0; k < plan.jobs.size(); ++k) {
      const CaseJob& job = jobs[plan.jobs[k]];
      plan.results[job.index] = results[plan.jobs[k]];
    }
    graded[i].score = pass_rate(std::move(plan.results));
  }
  return graded;
}

}  // namespace rlcore::reward
