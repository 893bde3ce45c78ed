#include "sched/forecast.h"

#include <algorithm>
#include <cmath>

namespace gpufleet::sched {

namespace {
constexpr const char* kNames[Forecaster::kModels] = {"last", "daily", "weekly", "holt"};
}

Forecaster::Forecaster(double step_s, int horizon)
    : step_s_(step_s),
      horizon_(std::max(1, horizon)),
      day_(std::max<size_t>(1, static_cast<size_t>(std::lround(86400.0 / step_s)))),
      week_(day_ * 7),
      history_(week_ + 1, NAN),
      season_(day_, 0.0),
      used_pending_(static_cast<size_t>(horizon_) + 1, NAN) {
  for (auto& p : pending_) p.assign(static_cast<size_t>(horizon_) + 1, NAN);
}

double Forecaster::Past(size_t steps_ago) const {
  if (steps_ago >= n_ || steps_ago >= history_.size()) return NAN;
  return history_[(n_ - 1 - steps_ago) % history_.size()];
}

double Forecaster::ModelForecast(int model, int h) const {
  if (n_ == 0) return 0;
  double last = Past(0);
  switch (model) {
    case 0:
      return last;
    case 1: {  // the same time yesterday: h steps ahead is (day - h) steps ago
      double v = h <= static_cast<int>(day_) ? Past(day_ - static_cast<size_t>(h)) : NAN;
      return std::isnan(v) ? last : v;
    }
    case 2: {
      double v = h <= static_cast<int>(week_) ? Past(week_ - static_cast<size_t>(h)) : NAN;
      return std::isnan(v) ? last : v;
    }
    default: {
      if (!hw_ready_) return last;
      size_t idx = (n_ - 1 + static_cast<size_t>(h)) % day_;
      return std::max(0.0, level_ + h * trend_ + season_[idx]);
    }
  }
}

void Forecaster::Observe(double demand) {
  size_t slot = n_ % used_pending_.size();
  // Score what was forecast for this step `horizon_` steps ago.
  for (int m = 0; m < kModels; ++m) {
    double f = pending_[m][slot];
    if (std::isnan(f)) continue;
    double e = std::abs(f - demand);
    double under = std::max(0.0, demand - f);
    error_[m] = scored_[m] == 0 ? e : 0.98 * error_[m] + 0.02 * e;
    shortfall_[m] = scored_[m] == 0 ? under : 0.98 * shortfall_[m] + 0.02 * under;
    ++scored_[m];
    size_t hour = Hour(n_);
    double w = hour_scored_[m][hour] == 0 ? 1 : kHourWeight;
    hour_shortfall_[m][hour] = (1 - w) * hour_shortfall_[m][hour] + w * under;
    ++hour_scored_[m][hour];
  }
  double used = used_pending_[slot];
  if (!std::isnan(used)) {
    if (demand > 0) {
      ape_sum_ += std::abs(used - demand) / demand;
      ++used_scored_;
    }
    err_sum_ += used - demand;
    actual_sum_ += demand;
  }
  // Holt-Winters: start after one day, from that day's mean and its shape.
  size_t s = n_ % day_;
  if (hw_ready_) {
    double prev_level = level_;
    level_ = alpha_ * (demand - season_[s]) + (1 - alpha_) * (level_ + trend_);
    trend_ = beta_ * (level_ - prev_level) + (1 - beta_) * trend_;
    season_[s] = gamma_ * (demand - level_) + (1 - gamma_) * season_[s];
  }
  history_[n_ % history_.size()] = demand;
  ++n_;
  if (!hw_ready_ && n_ == day_) {
    double sum = 0;
    for (size_t i = 0; i < day_; ++i) sum += Past(i);
    level_ = sum / static_cast<double>(day_);
    trend_ = 0;
    for (size_t i = 0; i < day_; ++i) season_[i] = history_[i % history_.size()] - level_;
    hw_ready_ = true;
  }
  // The model with the lowest recent error (ties: the simpler); then record forecasts.
  for (int m = 0; m < kModels; ++m) {
    if (scored_[m] >= 8 && (scored_[best_] < 8 || error_[m] < error_[best_] * 0.97)) best_ = m;
  }
  size_t ahead = (n_ - 1 + static_cast<size_t>(horizon_)) % used_pending_.size();
  for (int m = 0; m < kModels; ++m) pending_[m][ahead] = ModelForecast(m, horizon_);
  used_pending_[ahead] = ModelForecast(best_, horizon_);
}

double Forecaster::HourShortfall() const {
  if (n_ == 0) return 0;
  size_t hour = Hour(n_ - 1 + static_cast<size_t>(horizon_));
  return hour_scored_[best_][hour] >= 8 ? hour_shortfall_[best_][hour] : shortfall();
}

double Forecaster::Forecast(int h) const { return ModelForecast(best_, std::max(1, h)); }

double Forecaster::Peak(int h) const {
  double peak = 0;
  for (int i = 1; i <= std::max(1, h); ++i) peak = std::max(peak, Forecast(i));
  return peak;
}

ForecastStats Forecaster::stats() const {
  ForecastStats s;
  s.model = kNames[best_];
  s.scored = used_scored_;
  s.mape = used_scored_ ? ape_sum_ / static_cast<double>(used_scored_) : NAN;
  s.bias = actual_sum_ > 0 ? err_sum_ / actual_sum_ : NAN;
  s.shortfall = shortfall();
  return s;
}

DemandTracker::DemandTracker(double step_s, double lead_time_s, double interval_s)
    : step_s_(step_s),
      horizon_(std::max(1, static_cast<int>(std::ceil((lead_time_s + interval_s) / step_s)))),
      forecaster_(step_s, horizon_) {}

void DemandTracker::Observe(double t_s, double demand) {
  if (!observed_) {
    next_step_ = t_s + step_s_;
    observed_ = true;
  }
  step_peak_ = std::max(step_peak_, demand);
  // A long gap is filled with at most a week of steps.
  if (t_s - next_step_ > 7 * 86400.0) next_step_ = t_s - 7 * 86400.0;
  while (t_s >= next_step_) {
    forecaster_.Observe(step_peak_);
    step_peak_ = demand;
    next_step_ += step_s_;
  }
}

double DemandTracker::PlanningPeak(double margin, bool by_hour) const {
  double shortfall = by_hour ? forecaster_.HourShortfall() : forecaster_.shortfall();
  return forecaster_.Peak(horizon_) + margin * shortfall;
}

}  // namespace gpufleet::sched
