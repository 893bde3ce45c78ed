#pragma once
// Demand forecasting for the autoscaler: the GPUs a pool is asked for (running plus queued),
// one value per step (its peak within the step). Four models run side by side:
//   last     the last value;
//   daily    the value one day ago (seasonal naive);
//   weekly   the value one week ago;
//   holt     additive Holt-Winters with a daily season and a trend;
// each one's forecast `horizon` steps ahead is scored when that time comes, and the forecast
// used is the one of the model with the lowest recent error (an exponentially weighted mean
// absolute error). Accuracy (MAPE and bias of the forecasts used) is kept for the API, and so is
// the model's recent mean shortfall (how far demand came out above the forecast, 0 when it came
// out below): the unit of the autoscaler's margin, since only a forecast that was too low makes
// jobs wait. The shortfall is kept twice: recent (over the last few hours) and per hour of the
// day (over the past days' same hour).

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace gpufleet::sched {

struct ForecastStats {
  std::string model;     // the model in use
  double mape = 0;       // mean absolute percentage error of the forecasts used (actual > 0)
  double bias = 0;       // sum(forecast - actual) / sum(actual): > 0 over-forecasts
  size_t scored = 0;     // forecasts scored
  double shortfall = 0;  // the model in use's recent mean max(0, actual - forecast) (GPUs)
};

class Forecaster {
 public:
  // `step_s`: seconds per step; `horizon`: the steps ahead that are scored (the autoscaler's
  // lead time plus one decision interval, in steps).
  Forecaster(double step_s, int horizon);
  static constexpr int kModels = 4;

  void Observe(double demand);  // the next step's value
  // The forecast h steps ahead (1 <= h) of the model in use.
  double Forecast(int h) const;
  // The largest forecast over the next `h` steps.
  double Peak(int h) const;
  ForecastStats stats() const;
  // Starts the accuracy figures (MAPE, bias, scored) afresh; what the models learned stays.
  void ResetAccuracy() {
    ape_sum_ = err_sum_ = actual_sum_ = 0;
    used_scored_ = 0;
  }
  // The model in use's recent mean absolute error at the horizon (GPUs).
  double error() const { return scored_[best_] ? error_[best_] : 0; }
  // Its recent mean shortfall at the horizon (GPUs): by how much demand came out above the
  // forecast, counting a forecast that came out too high as 0. It is what a margin over the
  // forecast must cover: a forecast too high costs idle GPUs, not waiting jobs, and counting
  // its misses too (as the absolute error does) widens the margin after demand falls, when it
  // is least needed.
  double shortfall() const { return scored_[best_] ? shortfall_[best_] : 0; }
  // The same over the past days' steps in the hour of the day of the step `horizon` ahead
  // (hours of a day of steps, counted from the first step observed): a rise that comes at that
  // hour every day has a large one there and none elsewhere. The recent one until that hour
  // has 8 steps scored.
  double HourShortfall() const;
  double step_s() const { return step_s_; }
  size_t observed() const { return n_; }

 private:
  double ModelForecast(int model, int h) const;
  double Past(size_t steps_ago) const;  // the value `steps_ago` before the last; NaN if none

  double step_s_;
  int horizon_;
  size_t day_, week_;            // steps per day and week
  std::vector<double> history_;  // ring of the last week
  size_t n_ = 0;
  // Holt-Winters state
  double alpha_ = 0.25, beta_ = 0.005, gamma_ = 0.25;
  double level_ = 0, trend_ = 0;
  std::vector<double> season_;
  bool hw_ready_ = false;
  // Scoring: each model's forecasts for the step `horizon_` ahead, in a ring by step.
  std::array<std::vector<double>, kModels> pending_;
  std::vector<double> used_pending_;         // what the chosen model forecast for each step
  std::array<double, kModels> error_{};      // EWMA of absolute error
  std::array<double, kModels> shortfall_{};  // EWMA of max(0, actual - forecast)
  std::array<size_t, kModels> scored_{};
  // Per hour of the day: each model's mean shortfall and the steps scored there.
  static constexpr size_t kHours = 24;
  static constexpr double kHourWeight = 0.05;  // a step's weight: the mean spans about 2 days
  size_t Hour(size_t step) const { return step % day_ * kHours / day_; }
  std::array<std::array<double, kHours>, kModels> hour_shortfall_{};
  std::array<std::array<size_t, kHours>, kModels> hour_scored_{};
  int best_ = 0;
  double ape_sum_ = 0, err_sum_ = 0, actual_sum_ = 0;
  size_t used_scored_ = 0;
};

// What a pool's autoscaler plans for, the same in the live controller and in `gpufleet replay`:
// the forecaster fed the peak demand of each step (steps counted from the first observation; a
// gap, such as a controller restart, is filled with the demand seen after it), and the forecast
// a decision uses: the peak over the lead time plus one decision interval, plus the policy's
// forecast_margin times the forecast's recent mean shortfall.
class DemandTracker {
 public:
  DemandTracker(double step_s, double lead_time_s, double interval_s);
  void Observe(double t_s, double demand);  // at every decision, in time order
  // margin: in mean shortfalls, the recent one or (by_hour) that of the forecast step's hour
  double PlanningPeak(double margin, bool by_hour = false) const;
  const Forecaster& forecaster() const { return forecaster_; }
  void ResetAccuracy() { forecaster_.ResetAccuracy(); }
  int horizon() const { return horizon_; }

 private:
  double step_s_;
  int horizon_;
  Forecaster forecaster_;
  double step_peak_ = 0;
  double next_step_ = 0;
  bool observed_ = false;  // next_step_ is set (times may be negative: a replay's warm-up)
};

}  // namespace gpufleet::sched
