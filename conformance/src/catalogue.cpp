// The catalogue: every family's properties in ID order (spec/properties.md §3).
#include <pacts/conformance/property.h>

#include <algorithm>

namespace pacts::conformance {

std::string Property::test_name() const {
  std::string s = id;
  std::replace(s.begin(), s.end(), '-', '_');
  return s + "_" + name;
}

Property make_property(std::string id, std::string name, Level level, bool bitwise,
                       GenLimits limits,
                       std::function<Outcome(PropertyContext&, const CaseSpec&)> check) {
  Property p;
  p.id = std::move(id);
  p.name = std::move(name);
  p.level = level;
  p.bitwise = bitwise;
  p.limits = limits;
  p.check = std::move(check);
  return p;
}

const std::vector<Property>& catalogue() {
  static const std::vector<Property> all = [] {
    std::vector<Property> v;
    for (auto family : {acc_properties, poison_properties, meta_properties, edge_properties,
                        refuse_properties, dev_properties}) {
      std::vector<Property> f = family();
      v.insert(v.end(), f.begin(), f.end());
    }
    return v;
  }();
  return all;
}

const Property* find_property(std::string_view id) {
  for (const Property& p : catalogue())
    if (p.id == id) return &p;
  return nullptr;
}

}  // namespace pacts::conformance
