// The prices the reports use (Rates in reports.h): GPU-hours by model and site, energy, and
// their strict JSON form (GET/PUT /api/v1/reports/rates).

#include <boost/json.hpp>

#include "common/json_fields.h"
#include "common/json_text.h"
#include "usage/reports.h"

namespace json = boost::json;

namespace gpufleet::usage {

double Rates::GpuHour(const GpuCatalog& catalog, const std::string& model,
                      const std::string& site) const {
  const Rate* any = nullptr;
  for (const auto& r : gpu_hour) {
    if (r.model != model) continue;
    if (!site.empty() && r.site == site) return r.gpu_hour;
    if (r.site.empty()) any = &r;
  }
  if (any) return any->gpu_hour;
  const GpuModelSpec* spec = catalog.Find(model);
  return spec && spec->price_per_gpu_hour > 0 ? spec->price_per_gpu_hour : default_gpu_hour;
}

namespace {

// A price: a number from 0 to a million.
Status Price(JsonFields& f, std::string_view key, double& out) {
  double p = out;
  GF_TRY(f.Number(key, p));
  if (p < 0 || p > 1e6) return f.Bad(key, "must be a price, 0 or more");
  out = p;
  return {};
}

Status RateOf(JsonFields& f, const GpuCatalog& catalog, Rates::Rate& rate) {
  GF_TRY(f.Only({"model", "site", "price"}));
  GF_TRY(f.String("model", rate.model));
  GF_TRY(f.String("site", rate.site));
  if (!f.Get("price")) return f.Bad("price", "is required");
  GF_TRY(Price(f, "price", rate.gpu_hour));
  if (!catalog.Find(rate.model)) {
    return f.Bad("model", "unknown GPU model '" + rate.model + "'");
  }
  return {};
}

}  // namespace

Result<Rates> ParseRates(std::string_view text, const GpuCatalog& catalog) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) {
    return MakeError(ErrorCode::kInvalidArgument, "rates must be a JSON object");
  }
  JsonFields f(v.as_object());
  GF_TRY(f.Only({"currency", "energy_kwh", "default_gpu_hour", "gpu_hour"}));
  Rates r;
  GF_TRY(f.String("currency", r.currency));
  if (r.currency.empty() || r.currency.size() > 8) {
    return f.Bad("currency", "must be a short code such as USD");
  }
  GF_TRY(Price(f, "energy_kwh", r.energy_kwh));
  GF_TRY(Price(f, "default_gpu_hour", r.default_gpu_hour));
  const json::value* list = f.Get("gpu_hour");
  if (!list) return r;
  if (!list->is_array()) return f.Bad("gpu_hour", "must be a list");
  for (size_t i = 0; i < list->as_array().size(); ++i) {
    const json::value& item = list->as_array()[i];
    const std::string at = "gpu_hour[" + std::to_string(i) + "]";
    if (!item.is_object()) return f.Bad(at, "must be an object");
    Rates::Rate rate;
    JsonFields rf(item.as_object(), at);
    GF_TRY(RateOf(rf, catalog, rate));
    for (const auto& other : r.gpu_hour) {
      if (other.model == rate.model && other.site == rate.site) {
        return f.Bad(
            at, rate.model + (rate.site.empty() ? "" : " at " + rate.site) + " is priced twice");
      }
    }
    r.gpu_hour.push_back(std::move(rate));
  }
  return r;
}

std::string RatesJson(const Rates& r) {
  json::array list;
  for (const auto& rate : r.gpu_hour) {
    list.push_back(
        json::object{{"model", rate.model}, {"site", rate.site}, {"price", rate.gpu_hour}});
  }
  return JsonText(json::object{{"currency", r.currency},
                               {"energy_kwh", r.energy_kwh},
                               {"default_gpu_hour", r.default_gpu_hour},
                               {"gpu_hour", std::move(list)}});
}

}  // namespace gpufleet::usage
