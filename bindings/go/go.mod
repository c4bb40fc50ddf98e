module kolibri.dev/kolibri

go 1.19
