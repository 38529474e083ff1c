// Pieces of the JUnit XML reports that pacts-qualify and pacts-fuzz write (one spelling of names
// and text for both, so that a CI dashboard groups their results the same way).
#pragma once

#include <string>

namespace pacts::conformance {

// The text of an XML attribute value or character data: the five special characters as entities,
// and the control characters XML 1.0 does not admit (all but tab, newline, carriage return) as a
// space.
std::string xml_escaped(const std::string& s);

// The backend part of a JUnit classname, in [A-Za-z0-9_.-] ("unnamed" when empty): never a path,
// since a JUnit reader splits a classname at its dots ("lib:/opt/k/libk.so" would read as class
// "so"). A plugin ("lib:PATH") gives its file stem without "lib", a child ("exec:CMD") its
// command's stem; every other character outside the set becomes '_'.
std::string junit_class_part(std::string name);

// This machine's host name ("unknown" when it has none), for a testsuite's hostname.
std::string host_name();

}  // namespace pacts::conformance
