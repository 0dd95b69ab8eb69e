#!/usr/bin/env bash
printf 'Hello from repogym\n' > /app/greeting.txt
