// The engine's lock goes to its waiters in the order they asked, so a thread
// stepping the engine back to back cannot starve submit() and abort().
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "fifo_mutex.h"

using rlcore::infer_native::FifoMutex;

namespace {

void wait_for_waiters(FifoMutex& mutex, uint64_t count) {
  for (int i = 0; i < 10000 && mutex.waiting() < count; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  REQUIRE(mutex.waiting() == count);
}

}  // namespace

TEST_CASE("the FIFO mutex hands the lock over in arrival order, the holder's next lock() last",
          "[infer-native][requests]") {
  FifoMutex mutex;
  std::vector<std::string> order;
  mutex.lock();  // the stepping thread, in a step
  CHECK(mutex.waiting() == 0);
  std::vector<std::thread> waiters;
  for (const char* name : {"submit a", "abort b", "submit c"}) {
    waiters.emplace_back([&mutex, &order, name] {
      std::lock_guard<FifoMutex> lock(mutex);
      order.emplace_back(name);
    });
    wait_for_waiters(mutex, waiters.size());
  }
  mutex.unlock();
  {
    std::lock_guard<FifoMutex> next_step(mutex);  // queues behind the three
    order.emplace_back("step");
  }
  for (std::thread& waiter : waiters) waiter.join();
  CHECK(order == std::vector<std::string>{"submit a", "abort b", "submit c", "step"});
  CHECK(mutex.waiting() == 0);
}
