"""Command-line interface: dpspec check | compile | verify | explain | fmt | rules."""
