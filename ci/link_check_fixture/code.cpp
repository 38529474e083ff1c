// Fixture of ci/link_check.cmake, never compiled: ci/link_check_bites.cmake appends the planted
// tracker number to a copy of this file.
int planted[2];  // a line with ; and [ ] for the line splitting \
